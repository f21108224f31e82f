//! The one way fsgauge reaches a path a user named: one component at a time from `/`, through
//! held directory descriptors, reading symbolic links itself instead of letting the kernel
//! follow them, so that a link planted by another local user cannot point root's reads or
//! writes somewhere that user could not reach.
//!
//! The rule is systemd's `chase()` with `CHASE_SAFE`, applied where a path can be redirected:
//! - **A link is followed only within its owner's reach.** A symbolic link owned by an
//!   unprivileged user (neither root nor the effective user) leads only to what that user
//!   owns: every step of its target — `/` for an absolute one, the parent for `..`, each
//!   entry — must be owned by the link's owner, or the path is refused, naming the link, its
//!   owner and what it led to. A link in a directory of an unprivileged user must be owned by
//!   that user too (a hard link to root's own symlink, planted under another name, is refused).
//! - **A directory entry is entered as it is.** Another user cannot move a directory of
//!   someone else's into a directory of their own (the kernel asks for write permission on the
//!   directory itself to move it to a new parent), so a root-owned directory below a user's
//!   directory was made there by root. systemd refuses that transition too; fsgauge does not,
//!   so that `sudo fsgauge run` in a user's home keeps finding the results directory it made
//!   there the first time.
//! - **A file read as input** from a directory of an unprivileged user must be that user's,
//!   or have a single link: with `fs.protected_hardlinks` = 0, a hard link to root's file is
//!   another name for its contents ([`check_input_owner`]).
//!
//! None of this depends on `fs.protected_symlinks` or `fs.protected_hardlinks`.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use anyhow::{anyhow, Context, Result};

use super::owner::{distrust, fstat, mkdir_at, owner_text, stat_at};
use crate::base::error::bad_input;

/// Links followed in one path at most (Linux's own limit is 40).
const MAX_LINKS: u32 = 40;

/// How [`chase`] treats the path's last component and missing directories.
#[derive(Debug, Clone, Copy, Default)]
pub struct Opts {
    /// Follow a symbolic link in the last component (under the same rule as the others).
    pub follow_last: bool,
    /// Make missing directories (every missing component, the last included) with this mode.
    pub create: Option<u32>,
}

impl Opts {
    /// Follow every link, the last included; make nothing.
    pub const FOLLOW: Opts = Opts {
        follow_last: true,
        create: None,
    };
}

/// Where a chase ended.
#[derive(Debug)]
pub struct Chased {
    /// The deepest directory reached: the path itself when it names a directory, else the
    /// directory holding its last component, or the deepest one that exists.
    pub dir: OwnedFd,
    /// Its real path (symbolic links resolved).
    pub dir_path: PathBuf,
    /// What of the path lies below `dir`: nothing (the path is `dir`); one name that exists
    /// and is not a directory (`st` is its stat; a link when not followed); or names that do
    /// not exist, the first of them missing in `dir`.
    pub rest: Vec<OsString>,
    /// The stat of `rest[0]` when it exists.
    pub st: Option<libc::stat>,
    /// The first directory on the real path (from `/` to `dir`) that others can change, and
    /// why ([`distrust`]); `None` when every one is trusted.
    pub untrusted: Option<String>,
}

impl Chased {
    /// The full real path of what was named (`dir_path` and `rest`).
    pub fn path(&self) -> PathBuf {
        let mut p = self.dir_path.clone();
        p.extend(&self.rest);
        p
    }
}

/// A directory on the way: its descriptor (`O_PATH`), stat and real path.
struct Node {
    fd: OwnedFd,
    st: libc::stat,
    path: PathBuf,
}

/// A component still to resolve, and the owner of the link whose target it came from when
/// that owner is unprivileged (everything it reaches must be that user's).
struct Step {
    name: OsString,
    via: Option<Via>,
}

#[derive(Clone)]
struct Via {
    uid: u32,
    link: PathBuf,
    target: PathBuf,
}

fn trusted_uid(uid: u32) -> bool {
    uid == 0 || uid == nix::unistd::geteuid().as_raw()
}

fn io_at(what: &str, path: &Path, e: std::io::Error) -> anyhow::Error {
    anyhow::Error::new(e).context(format!("{what} {}", path.display()))
}

/// Opens `name` in `dir` as an `O_PATH` directory descriptor, never following a link.
fn open_path_dir(dir: BorrowedFd<'_>, name: &OsStr) -> std::io::Result<OwnedFd> {
    let c = std::ffi::CString::new(name.as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    Ok(super::open_at(dir.as_raw_fd(), &c, flags, 0)?)
}

/// A real descriptor (`O_RDONLY | O_DIRECTORY`) of the directory an `O_PATH` one names.
pub fn reopen_dir(fd: BorrowedFd<'_>) -> std::io::Result<OwnedFd> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
    Ok(super::open_at(fd.as_raw_fd(), c".", flags, 0)?)
}

fn readlink_at(dir: BorrowedFd<'_>, name: &OsStr) -> std::io::Result<PathBuf> {
    nix::fcntl::readlinkat(Some(dir.as_raw_fd()), name)
        .map(PathBuf::from)
        .map_err(|e| std::io::Error::from_raw_os_error(e as i32))
}

/// Refuses a step from something owned by `via` (a link of an unprivileged user) to `to`
/// (owned by `to_uid`).
fn check_via(via: &Option<Via>, to: &Path, to_uid: u32) -> Result<()> {
    match via {
        Some(v) if v.uid != to_uid => Err(bad_input(format!(
            "{} is a symbolic link owned by {} to {}, which passes through {}, owned by {}: fsgauge follows another user's link only to what that user owns, since the link could point its reads and writes anywhere; give the real path",
            v.link.display(),
            owner_text(v.uid),
            v.target.display(),
            to.display(),
            owner_text(to_uid)
        ))),
        _ => Ok(()),
    }
}

/// The components of `path`, made absolute against the working directory.
fn components(path: &Path) -> Result<VecDeque<Step>> {
    if path.as_os_str().is_empty() {
        return Err(bad_input(
            "an empty path was given; name a file or directory",
        ));
    }
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .context("finding the working directory (was it removed?)")?
            .join(path)
    };
    Ok(steps(&abs, &None))
}

/// The steps of `path` (its names and `..`; `/` and `.` take none), each reached `via`.
fn steps(path: &Path, via: &Option<Via>) -> VecDeque<Step> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .map(|name| Step {
            name,
            via: via.clone(),
        })
        .collect()
}

fn root() -> Result<Node> {
    let fd = open_path_dir(at_fdcwd(), OsStr::new("/")).context("opening /")?;
    let st = fstat(fd.as_fd()).context("stat /")?;
    Ok(Node {
        fd,
        st,
        path: PathBuf::from("/"),
    })
}

/// `AT_FDCWD` as a borrowed descriptor (an absolute name ignores it).
fn at_fdcwd() -> BorrowedFd<'static> {
    // SAFETY: AT_FDCWD is a sentinel the *at calls accept in place of a descriptor; it is never
    // closed or used for anything but name lookup.
    unsafe { BorrowedFd::borrow_raw(libc::AT_FDCWD) }
}

/// Resolves `path` under the rule of this module; see [`Opts`] and [`Chased`].
pub fn chase(path: &Path, opts: Opts) -> Result<Chased> {
    let mut todo = components(path)?;
    let mut stack = vec![root()?];
    let mut links = 0;
    let mut rest = Vec::new();
    let mut last_st = None;
    while let Some(step) = todo.pop_front() {
        if step.name == ".." {
            climb(&mut stack, &step.via)?;
            continue;
        }
        let top = stack.last().expect("the root stays on the stack");
        let here = top.path.join(&step.name);
        let st = match stat_at(top.fd.as_fd(), &step.name) {
            Ok(st) => st,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Some(mode) = opts.create {
                    create_dir(top, &step.name, &here, mode)?;
                    todo.push_front(step);
                    continue;
                }
                rest.push(step.name);
                rest.extend(todo.drain(..).map(|s| s.name));
                if rest.iter().any(|n| n == "..") {
                    return Err(bad_input(format!(
                        "{}: {} does not exist, and the path goes on with '..' below it; give the path without '..'",
                        path.display(),
                        here.display()
                    )));
                }
                break;
            }
            Err(e) => return Err(io_at("looking up", &here, e)),
        };
        check_via(&step.via, &here, st.st_uid)?;
        let kind = st.st_mode & libc::S_IFMT;
        if !trusted_uid(top.st.st_uid) && kind == libc::S_IFLNK && st.st_uid != top.st.st_uid {
            return Err(bad_input(format!(
                "{} is a symbolic link owned by {} in a directory of {}: another name for someone else's link; give the real path",
                here.display(),
                owner_text(st.st_uid),
                owner_text(top.st.st_uid)
            )));
        }
        let last = todo.is_empty();
        if kind == libc::S_IFLNK && (!last || opts.follow_last) {
            links += 1;
            if links > MAX_LINKS {
                return Err(bad_input(format!(
                    "{}: more than {MAX_LINKS} symbolic links on the way (ELOOP: a loop of links?)",
                    path.display()
                )));
            }
            let mut next = follow(&mut stack, &step, &st, here)?;
            next.extend(todo.drain(..));
            todo = next;
            continue;
        }
        if kind == libc::S_IFDIR {
            let node = open_child(top, &step, here)?;
            stack.push(node);
            continue;
        }
        if !last {
            return Err(bad_input(format!(
                "{}: {} is not a directory",
                path.display(),
                here.display()
            )));
        }
        rest.push(step.name);
        last_st = Some(st);
    }
    let untrusted = stack
        .iter()
        .find_map(|n| distrust(&n.st).map(|why| format!("{}: {why}", n.path.display())));
    let top = stack.pop().expect("the root stays on the stack");
    Ok(Chased {
        dir: top.fd,
        dir_path: top.path,
        rest,
        st: last_st,
        untrusted,
    })
}

/// Takes a `..` step (reached `via`): up to the parent directory, and from `/` to itself.
fn climb(stack: &mut Vec<Node>, via: &Option<Via>) -> Result<()> {
    if stack.len() > 1 {
        let child = stack.pop().expect("more than the root");
        let parent = stack.last().expect("the root stays on the stack");
        check_via(via, &parent.path, parent.st.st_uid)?;
        drop(child);
    } else {
        check_via(via, Path::new("/"), stack[0].st.st_uid)?;
    }
    Ok(())
}

/// Makes the missing directory `name` (at `here`) in `top`; one made meanwhile will do.
fn create_dir(top: &Node, name: &OsStr, here: &Path, mode: u32) -> Result<()> {
    match mkdir_at(top.fd.as_fd(), Path::new(name), mode) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(io_at("creating", here, e)),
        _ => Ok(()),
    }
}

/// The steps of the link `step` (stat `st`, at `here`) in the top directory, to take before the
/// rest: reached through it when an unprivileged user owns it, from `/` when it is absolute.
fn follow(
    stack: &mut Vec<Node>,
    step: &Step,
    st: &libc::stat,
    here: PathBuf,
) -> Result<VecDeque<Step>> {
    let top = stack.last().expect("the root stays on the stack");
    let target =
        readlink_at(top.fd.as_fd(), &step.name).map_err(|e| io_at("reading the link", &here, e))?;
    let via = if trusted_uid(st.st_uid) {
        step.via.clone()
    } else {
        Some(Via {
            uid: st.st_uid,
            link: here,
            target: target.clone(),
        })
    };
    if target.is_absolute() {
        stack.truncate(1);
        check_via(&via, Path::new("/"), stack[0].st.st_uid)?;
    }
    Ok(steps(&target, &via))
}

/// Opens the directory `step` (at `here`) in `top`, refusing it when it changed into a link or
/// a file since its stat.
fn open_child(top: &Node, step: &Step, here: PathBuf) -> Result<Node> {
    let fd = open_path_dir(top.fd.as_fd(), &step.name).map_err(|e| {
        if e.raw_os_error() == Some(libc::ELOOP) || e.raw_os_error() == Some(libc::ENOTDIR) {
            anyhow!(
                "{} changed while fsgauge was resolving it (now a link or a file); give a path that others cannot change",
                here.display()
            )
        } else {
            io_at("opening", &here, e)
        }
    })?;
    let st = fstat(fd.as_fd()).map_err(|e| io_at("stat", &here, e))?;
    check_via(&step.via, &here, st.st_uid)?;
    Ok(Node { fd, st, path: here })
}

/// Refuses a file to read (stat `st`, at `path`) found in a directory owned by an unprivileged
/// user (`dir_uid`) when it is someone else's with more than one link: with
/// `fs.protected_hardlinks` = 0 such a link is another name for a file that user could not
/// read. The refusal is the reader's to report ([`crate::base::bounded`] makes it its own).
pub fn check_input_owner(
    path: &Path,
    st: &libc::stat,
    dir_uid: u32,
) -> std::result::Result<(), ForeignLink> {
    if !trusted_uid(dir_uid) && st.st_uid != dir_uid && st.st_nlink > 1 {
        return Err(ForeignLink {
            path: path.to_path_buf(),
            uid: st.st_uid,
            links: st.st_nlink,
            dir_uid,
        });
    }
    Ok(())
}

/// A file to read that may be another user's hard link to a file they cannot read (see
/// [`check_input_owner`]).
#[derive(Debug, thiserror::Error)]
#[error(
    "{} is a file of {} with {links} links in a directory of {}: it may be another user's hard link to a file they cannot read; copy it somewhere of your own",
    .path.display(),
    owner_text(*.uid),
    owner_text(*.dir_uid)
)]
pub struct ForeignLink {
    path: PathBuf,
    uid: u32,
    links: libc::nlink_t,
    dir_uid: u32,
}

/// The owner of the directory an `O_PATH` descriptor names.
pub fn owner_of(fd: BorrowedFd<'_>) -> Result<u32> {
    Ok(fstat(fd).context("stat a directory")?.st_uid)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::symlink;

    fn tmp() -> tempfile::TempDir {
        tempfile::tempdir_in("/var/tmp").unwrap()
    }

    #[test]
    fn follows_the_users_own_links_and_reports_what_is_missing() {
        let t = tmp();
        let real = t.path().canonicalize().unwrap();
        std::fs::create_dir(real.join("a")).unwrap();
        std::fs::write(real.join("a/f"), b"x").unwrap();
        symlink("a", real.join("rel")).unwrap();
        symlink(real.join("a"), real.join("abs")).unwrap();
        let c = chase(&real.join("rel/f"), Opts::default()).unwrap();
        assert_eq!(c.dir_path, real.join("a"));
        assert_eq!(c.rest, vec![OsString::from("f")]);
        assert!(c.st.is_some());
        let c = chase(&real.join("abs/new/deeper"), Opts::default()).unwrap();
        assert_eq!(c.dir_path, real.join("a"));
        assert_eq!(
            c.rest,
            vec![OsString::from("new"), OsString::from("deeper")]
        );
        assert!(c.st.is_none());
        let c = chase(
            &real.join("abs/new/deeper"),
            Opts {
                create: Some(0o755),
                ..Opts::default()
            },
        )
        .unwrap();
        assert_eq!(c.dir_path, real.join("a/new/deeper"));
        assert!(c.rest.is_empty());
        // ".." is the real parent of where a link led.
        let c = chase(&real.join("abs/new/.."), Opts::default()).unwrap();
        assert_eq!(c.dir_path, real.join("a"));
        // A link last is kept unless followed.
        let c = chase(&real.join("rel"), Opts::default()).unwrap();
        assert_eq!(c.rest, vec![OsString::from("rel")]);
        assert_eq!(c.st.unwrap().st_mode & libc::S_IFMT, libc::S_IFLNK);
        let c = chase(
            &real.join("rel"),
            Opts {
                follow_last: true,
                ..Opts::default()
            },
        )
        .unwrap();
        assert_eq!(c.dir_path, real.join("a"));
        assert!(c.rest.is_empty());
    }

    #[test]
    fn a_link_loop_is_refused() {
        let t = tmp();
        symlink("b", t.path().join("a")).unwrap();
        symlink("a", t.path().join("b")).unwrap();
        let e = format!(
            "{:#}",
            chase(&t.path().join("a/x"), Opts::default()).unwrap_err()
        );
        assert!(e.contains("more than 40 symbolic links"), "{e}");
    }

    /// Runs `f` with this thread's effective uid set to nobody (the kernel keeps credentials
    /// per thread; the raw system call changes only this one).
    fn as_nobody(f: impl FnOnce() + Send) {
        std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: setresuid on this thread only; the thread ends right after.
                let rc = unsafe { libc::syscall(libc::SYS_setresuid, -1, 65534, -1) };
                assert_eq!(rc, 0);
                f();
            });
        });
    }

    #[test]
    fn another_users_link_leads_only_to_what_that_user_owns() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: needs root to act as another user");
            return;
        }
        let t = tmp();
        let real = t.path().canonicalize().unwrap();
        std::fs::create_dir(real.join("secret")).unwrap();
        std::fs::write(real.join("secret/keep.txt"), b"root's").unwrap();
        let home = real.join("home");
        std::fs::create_dir(&home).unwrap();
        std::os::unix::fs::chown(&home, Some(65534), Some(65534)).unwrap();
        std::fs::create_dir(home.join("own")).unwrap();
        std::os::unix::fs::chown(home.join("own"), Some(65534), Some(65534)).unwrap();
        as_nobody(|| {
            symlink(real.join("secret"), home.join("abs")).unwrap();
            symlink("../secret", home.join("rel")).unwrap();
            symlink("own", home.join("mine")).unwrap();
        });
        for link in ["abs", "rel"] {
            let e = format!(
                "{:#}",
                chase(&home.join(link).join("keep.txt"), Opts::default()).unwrap_err()
            );
            assert!(
                e.contains(&format!("{}", home.join(link).display()))
                    && e.contains("uid 65534")
                    && e.contains("root"),
                "{e}"
            );
        }
        // Its own directory, through its own relative link: followed.
        let c = chase(&home.join("mine/x"), Opts::default()).unwrap();
        assert_eq!(c.dir_path, home.join("own"));
        assert!(
            c.untrusted.is_some(),
            "a directory of nobody's is not trusted"
        );
        // A link of root's in a directory of nobody's (a hard link of root's symlink).
        symlink(real.join("secret"), real.join("rootlink")).unwrap();
        std::fs::hard_link(real.join("rootlink"), home.join("hard")).unwrap();
        let e = format!(
            "{:#}",
            chase(&home.join("hard/keep.txt"), Opts::default()).unwrap_err()
        );
        assert!(e.contains("someone else's link"), "{e}");
    }
}
