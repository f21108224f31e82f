//! Serving a crash state: reads resolve through the [`Overlay`] (a logged write's data, an
//! undo pre-image, zeros) and fall through to the store; writes (a journal replayed at mount,
//! a checker's repair) go to a private copy-on-write map of sectors, which goes with the
//! state when the next one is set. Nothing here is timed: the crash file is a checker's disk.

use std::collections::btree_map::Entry as Slot;
use std::collections::BTreeMap;
use std::sync::Mutex;

use super::cut::{Overlay, Source};
use super::data::LogReader;
use crate::base::sys::Errno;
use crate::device::model::SECTOR;

const SECTOR_BYTES: usize = SECTOR as usize;

/// Reads `buf.len()` bytes of the store at an offset.
pub type StoreRead<'a> = &'a dyn Fn(&mut [u8], u64) -> Result<usize, Errno>;

/// A crash state being served.
#[derive(Debug, Default)]
pub struct CrashState {
    overlay: Overlay,
    /// The log's bytes the overlay maps (None: it maps none, only zeros).
    log: Option<LogReader>,
    /// Sectors written to the crash file since the state was set.
    cow: Mutex<BTreeMap<u64, Box<[u8]>>>,
    /// Disk writes counted when the state was set: a later one changes the store under it.
    pub disk_writes_at: u64,
}

impl CrashState {
    /// Serves `overlay` (whose data are in `log`) over the store as it is after
    /// `disk_writes_at` disk writes.
    pub fn new(overlay: Overlay, log: Option<LogReader>, disk_writes_at: u64) -> CrashState {
        CrashState {
            overlay,
            log,
            cow: Mutex::new(BTreeMap::new()),
            disk_writes_at,
        }
    }

    /// Bytes written to the crash file since the state was set (its private copy).
    pub fn cow_bytes(&self) -> u64 {
        self.cow.lock().unwrap_or_else(|p| p.into_inner()).len() as u64 * SECTOR
    }

    /// Fills `buf` from byte `off` of the crash state.
    pub fn read(&self, buf: &mut [u8], off: u64, store: StoreRead<'_>) -> Result<(), Errno> {
        self.read_beneath(buf, off, store)?;
        let cow = self.cow.lock().unwrap_or_else(|p| p.into_inner());
        let end = off + buf.len() as u64;
        for (&s, data) in cow.range(off / SECTOR..end.div_ceil(SECTOR)) {
            let (lo, hi) = ((s * SECTOR).max(off), ((s + 1) * SECTOR).min(end));
            buf[(lo - off) as usize..(hi - off) as usize]
                .copy_from_slice(&data[(lo - s * SECTOR) as usize..(hi - s * SECTOR) as usize]);
        }
        Ok(())
    }

    /// The overlay over the store, without the private writes.
    fn read_beneath(&self, buf: &mut [u8], off: u64, store: StoreRead<'_>) -> Result<(), Errno> {
        let end = off + buf.len() as u64;
        let mut pos = off;
        while pos < end {
            let s = pos / SECTOR;
            let here = self
                .overlay
                .pieces
                .range(..=s)
                .next_back()
                .filter(|(&first, p)| first + p.sectors > s);
            let out = |upto: u64| (pos - off) as usize..(upto.min(end) - off) as usize;
            match here {
                Some((&first, p)) => {
                    let upto = ((first + p.sectors) * SECTOR).min(end);
                    let into = &mut buf[out(upto)];
                    match &p.source {
                        Source::Zero => into.fill(0),
                        Source::Data { at } => {
                            let log = self.log.as_ref().ok_or(Errno::EIO)?;
                            log.read(into, at + (pos - first * SECTOR))?;
                        }
                    }
                    pos = upto;
                }
                None => {
                    let next = self.overlay.pieces.range(s + 1..).next();
                    let upto = next.map_or(end, |(&n, _)| (n * SECTOR).min(end));
                    store(&mut buf[out(upto)], pos)?;
                    pos = upto;
                }
            }
        }
        Ok(())
    }

    /// Writes `data` at byte `off` into the private copy (whole sectors: a partial one is
    /// read first).
    pub fn write(&self, data: &[u8], off: u64, store: StoreRead<'_>) -> Result<(), Errno> {
        let end = off + data.len() as u64;
        let mut cow = self.cow.lock().unwrap_or_else(|p| p.into_inner());
        for s in off / SECTOR..end.div_ceil(SECTOR) {
            let (lo, hi) = ((s * SECTOR).max(off), ((s + 1) * SECTOR).min(end));
            let sector = match cow.entry(s) {
                Slot::Occupied(o) => o.into_mut(),
                Slot::Vacant(v) => {
                    let mut sector = vec![0u8; SECTOR_BYTES].into_boxed_slice();
                    if hi - lo < SECTOR {
                        self.read_beneath(&mut sector, s * SECTOR, store)?;
                    }
                    v.insert(sector)
                }
            };
            sector[(lo - s * SECTOR) as usize..(hi - s * SECTOR) as usize]
                .copy_from_slice(&data[(lo - off) as usize..(hi - off) as usize]);
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::device::writelog::cut::Piece;
    use crate::device::writelog::data::LogData;

    #[test]
    fn reads_resolve_through_the_overlay_and_writes_stay_private() {
        let store = |b: &mut [u8], _off: u64| -> Result<usize, Errno> {
            b.fill(b'S');
            Ok(b.len())
        };
        let mut log = LogData::in_memory().unwrap();
        log.append(&[b'x'; 512]).unwrap();
        let data = log.append(&[b'L'; 2048]).unwrap();
        log.flush().unwrap();
        let mut overlay = Overlay::default();
        overlay.pieces.insert(
            2,
            Piece {
                sectors: 2,
                source: Source::Data { at: data.at + 512 },
            },
        );
        overlay.pieces.insert(
            5,
            Piece {
                sectors: 1,
                source: Source::Zero,
            },
        );
        let st = CrashState::new(overlay, Some(log.reader()), 0);
        let mut buf = vec![0u8; 8 * 512];
        st.read(&mut buf, 0, &store).unwrap();
        let per_sector: Vec<u8> = buf.chunks(512).map(|c| c[0]).collect();
        assert_eq!(per_sector, b"SSLLS\0SS");
        assert!(buf[1024..2048].iter().all(|&b| b == b'L'));
        // A write across sectors 4 and 5, unaligned: the rest of each sector kept.
        st.write(&[b'W'; 100], 4 * 512 + 480, &store).unwrap();
        st.read(&mut buf, 0, &store).unwrap();
        assert_eq!(&buf[4 * 512..4 * 512 + 480], &[b'S'; 480][..]);
        assert_eq!(&buf[4 * 512 + 480..4 * 512 + 580], &[b'W'; 100][..]);
        assert_eq!(&buf[4 * 512 + 580..6 * 512], &[0u8; 444][..]);
        assert_eq!(st.cow_bytes(), 1024);
        // A read from an offset inside a piece.
        let mut small = [0u8; 10];
        st.read(&mut small, 3 * 512 + 500, &store).unwrap();
        assert_eq!(&small, b"LLLLLLLLLL");
    }
}
