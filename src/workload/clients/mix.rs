//! The built-in client load: a file-server-like mix of our own making, written in the same
//! operation vocabulary as dbench loadfiles so the same replay engine runs it.
//!
//! *Setup* (measured as its own phase): each client makes `dirs` directories and `files` files
//! of sizes drawn log-uniformly from 4 KiB to 128 KiB. *Body* (replayed in a loop): `ops`
//! transactions drawn by weight — whole-file reads (45%), partial overwrites (15%),
//! create-write-close-unlink of a temporary file (10%), stat/fstat/set-times (12%), directory
//! listings (5%), small write + fsync (4%), rename there and back (4%), lock/unlock (2%),
//! mkdir/rmdir (2%), statfs (1%). Every transaction leaves the set of files as it found it, so
//! each pass starts from the same state and passes can repeat forever.

use rand::{Rng, SeedableRng};

use super::loadfile::{Kind, Op};

const CHUNK: i64 = 64 << 10;
const FILE_OPEN: i64 = 1;
const FILE_OVERWRITE_IF: i64 = 5;
const DIRECTORY: i64 = 0x1;

/// Shape of the built-in mix.
#[derive(Debug, Clone, Copy)]
pub struct MixShape {
    pub dirs: u32,
    pub files: u32,
    pub ops: u32,
}

fn dir(d: u32) -> String {
    format!("/clients/client1/d{d:02}")
}

fn file(f: u32, dirs: u32) -> String {
    format!("{}/f{f:04}", dir(f % dirs))
}

/// Size of file `f` (log-uniform 4 KiB .. 128 KiB, rounded to 512 bytes).
fn sizes(seed: u64, files: u32) -> Vec<i64> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x53495A45);
    (0..files)
        .map(|_| {
            let l: f64 = rng.gen_range((4096f64).ln()..(131072f64).ln());
            ((l.exp() as i64) / 512).max(1) * 512
        })
        .collect()
}

/// Bytes the files of one client take (for space checks).
pub fn client_bytes(seed: u64, shape: MixShape) -> u64 {
    sizes(seed, shape.files)
        .iter()
        .map(|&s| (s as u64).div_ceil(4096) * 4096)
        .sum::<u64>()
        + (256 << 10)
}

fn write_file(out: &mut Vec<Op>, path: &str, h: i64, size: i64) {
    out.push(Op::new(
        Kind::NtCreateX,
        Some(path),
        None,
        &[0, FILE_OVERWRITE_IF, h],
    ));
    let mut off = 0;
    while off < size {
        let n = CHUNK.min(size - off);
        out.push(Op::new(Kind::WriteX, None, None, &[h, off, n, n]));
        off += n;
    }
    out.push(Op::new(Kind::Close, None, None, &[h]));
}

/// The setup and the body of the mix for `seed`.
pub fn program(seed: u64, shape: MixShape) -> (Vec<Op>, Vec<Op>) {
    let shape = MixShape {
        dirs: shape.dirs.max(1),
        files: shape.files.max(1),
        ops: shape.ops.max(1),
    };
    let size = sizes(seed, shape.files);
    let mut setup = setup_ops(shape, &size);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x4D4958);
    let mut body = Vec::new();
    for _ in 0..shape.ops {
        let f = rng.gen_range(0..shape.files);
        transaction(&mut body, &mut rng, f, &size, shape.dirs);
    }
    number_lines(&mut setup);
    number_lines(&mut body);
    (setup, body)
}

/// The setup phase: a fresh client directory, its `dirs` subdirectories and every file
/// written to its size.
fn setup_ops(shape: MixShape, size: &[i64]) -> Vec<Op> {
    let mut setup = vec![
        Op::new(Kind::Deltree, Some("/clients/client1"), None, &[]),
        Op::new(Kind::Mkdir, Some("/clients"), None, &[]),
        Op::new(Kind::Mkdir, Some("/clients/client1"), None, &[]),
    ];
    for d in 0..shape.dirs {
        setup.push(Op::new(Kind::Mkdir, Some(&dir(d)), None, &[]));
    }
    for (f, &s) in size.iter().enumerate() {
        write_file(&mut setup, &file(f as u32, shape.dirs), 100, s);
    }
    setup
}

/// Appends one transaction on file `f` to `out`, its kind drawn by weight from `rng` (see the
/// module doc); every kind leaves the set of files as it found it.
fn transaction(
    out: &mut Vec<Op>,
    rng: &mut rand_chacha::ChaCha8Rng,
    f: u32,
    size: &[i64],
    dirs: u32,
) {
    let h = 200;
    let p = file(f, dirs);
    let s = size[f as usize];
    let open = |out: &mut Vec<Op>| {
        out.push(Op::new(Kind::NtCreateX, Some(&p), None, &[0, FILE_OPEN, h]));
    };
    let close = |out: &mut Vec<Op>| out.push(Op::new(Kind::Close, None, None, &[h]));
    match rng.gen_range(0..100) {
        0..=44 => {
            open(out);
            let mut off = 0;
            while off < s {
                let n = CHUNK.min(s - off);
                out.push(Op::new(Kind::ReadX, None, None, &[h, off, n, n]));
                off += n;
            }
            close(out);
        }
        45..=59 => {
            open(out);
            for _ in 0..rng.gen_range(1..=4) {
                let n = 4096.min(s);
                let off = rng.gen_range(0..=(s - n) / 512) * 512;
                out.push(Op::new(Kind::WriteX, None, None, &[h, off, n, n]));
            }
            close(out);
        }
        60..=69 => {
            let tmp = format!("{}/tmp{:03}", dir(f % dirs), rng.gen_range(0..1000));
            let ts = size[rng.gen_range(0..size.len())];
            write_file(out, &tmp, h + 1, ts);
            out.push(Op::new(Kind::Qpathinfo, Some(&tmp), None, &[1004]));
            out.push(Op::new(Kind::Unlink, Some(&tmp), None, &[0x6]));
        }
        70..=81 => {
            out.push(Op::new(Kind::Qpathinfo, Some(&p), None, &[1004]));
            open(out);
            out.push(Op::new(Kind::Qfileinfo, None, None, &[h, 1004]));
            out.push(Op::new(Kind::Sfileinfo, None, None, &[h, 1004]));
            close(out);
        }
        82..=86 => {
            let pat = format!("{}/*", dir(f % dirs));
            out.push(Op::new(Kind::Find, Some(&pat), None, &[260, 1366, 0]));
        }
        87..=90 => {
            open(out);
            let n = 4096.min(s);
            out.push(Op::new(Kind::WriteX, None, None, &[h, 0, n, n]));
            out.push(Op::new(Kind::Flush, None, None, &[h]));
            close(out);
        }
        91..=94 => {
            let other = format!("{p}.ren");
            out.push(Op::new(Kind::Rename, Some(&p), Some(&other), &[]));
            out.push(Op::new(Kind::Rename, Some(&other), Some(&p), &[]));
        }
        95..=96 => {
            open(out);
            out.push(Op::new(Kind::LockX, None, None, &[h, 0, 1]));
            out.push(Op::new(Kind::UnlockX, None, None, &[h, 0, 1]));
            close(out);
        }
        97..=98 => {
            let d = format!("{}/sub{:02}", dir(f % dirs), rng.gen_range(0..100));
            out.push(Op::new(
                Kind::NtCreateX,
                Some(&d),
                None,
                &[DIRECTORY, 2, h + 2],
            ));
            out.push(Op::new(Kind::Close, None, None, &[h + 2]));
            out.push(Op::new(Kind::Rmdir, Some(&d), None, &[]));
        }
        _ => out.push(Op::new(Kind::Qfsinfo, None, None, &[259])),
    }
}

/// Numbers the operations from 1, as lines of a loadfile are.
fn number_lines(ops: &mut [Op]) {
    for (i, op) in ops.iter_mut().enumerate() {
        op.line = i as u32 + 1;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_is_seeded_and_balanced() {
        let shape = MixShape {
            dirs: 4,
            files: 50,
            ops: 500,
        };
        let (s1, b1) = program(1, shape);
        let (_, b2) = program(1, shape);
        let (_, b3) = program(2, shape);
        assert_eq!(b1, b2);
        assert_ne!(b1, b3);
        let count = |k: Kind| b1.iter().filter(|o| o.kind == k).count();
        assert_eq!(
            count(Kind::NtCreateX),
            count(Kind::Close),
            "every open is closed"
        );
        assert!(count(Kind::ReadX) > count(Kind::WriteX) / 2);
        assert!(count(Kind::Rename) % 2 == 0);
        assert_eq!(
            s1.iter().filter(|o| o.kind == Kind::NtCreateX).count(),
            50,
            "setup creates every file"
        );
    }
}
