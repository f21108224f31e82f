//! Block contents and block order for the threaded-I/O workload.
//!
//! *Verification data*: every block written under `--verify` identifies itself — a 32-byte
//! header (magic, seed, file id, byte offset) followed by a pseudo-random payload derived from
//! those three numbers — so a read can tell not only *that* a block is wrong but *which* block
//! it holds instead (a misdirected write, a stale block, zeros from a lost write).
//!
//! *Random order*: random modes visit every block of a region exactly once, in an order drawn
//! from the seed, without storing the order (a keyed permutation with cycle walking, as fio's
//! random map guarantees each block once). Counts therefore add up exactly: a random-write
//! phase writes the region's size, no more, no less.

use std::fmt::Write as _;

/// First 8 bytes of every verification block.
pub const MAGIC: [u8; 8] = *b"FSGAUGE1";

/// Bytes of the self-identifying header at the start of each block.
pub const HEADER: usize = 32;

/// The splitmix64 step: a fast, well-mixed 64-bit generator (also used to derive keys).
#[inline]
pub fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn payload_seed(seed: u64, file: u64, offset: u64) -> u64 {
    let mut s = seed ^ file.rotate_left(32) ^ offset.wrapping_mul(0x2545_F491_4F6C_DD1D);
    splitmix(&mut s)
}

/// Fills `buf` (a multiple of 8 bytes, at least [`HEADER`]) with the block that belongs at
/// byte `offset` of file `file` under `seed`.
pub fn fill_block(buf: &mut [u8], seed: u64, file: u64, offset: u64) {
    buf[0..8].copy_from_slice(&MAGIC);
    buf[8..16].copy_from_slice(&seed.to_le_bytes());
    buf[16..24].copy_from_slice(&file.to_le_bytes());
    buf[24..32].copy_from_slice(&offset.to_le_bytes());
    let mut s = payload_seed(seed, file, offset);
    for chunk in buf[HEADER..].chunks_exact_mut(8) {
        chunk.copy_from_slice(&splitmix(&mut s).to_le_bytes());
    }
}

/// A block that did not hold what was written: where, what was expected, what was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Byte offset of the block in its file.
    pub offset: u64,
    pub expected: String,
    pub found: String,
}

fn le(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

fn hex(b: &[u8]) -> String {
    let mut s = String::new();
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
    s
}

/// Checks one block read back from byte `offset` of file `file`.
pub fn check_block(buf: &[u8], seed: u64, file: u64, offset: u64) -> Result<(), Mismatch> {
    let expected = format!("fsgauge block of file {file} at offset {offset} (seed {seed})");
    if buf[0..8] != MAGIC {
        let shown = &buf[..buf.len().min(16)];
        let what = if buf.iter().all(|&b| b == 0) {
            "all zeros (a lost or never-written block)".to_string()
        } else {
            format!(
                "data that is not an fsgauge block (first bytes {})",
                hex(shown)
            )
        };
        return Err(Mismatch {
            offset,
            expected,
            found: what,
        });
    }
    let (s, f, o) = (le(&buf[8..16]), le(&buf[16..24]), le(&buf[24..32]));
    if (s, f, o) != (seed, file, offset) {
        return Err(Mismatch {
            offset,
            expected,
            found: format!("the fsgauge block of file {f} at offset {o} (seed {s})"),
        });
    }
    let mut st = payload_seed(seed, file, offset);
    for (i, chunk) in buf[HEADER..].chunks_exact(8).enumerate() {
        let want = splitmix(&mut st).to_le_bytes();
        if chunk != want {
            let at = HEADER + i * 8;
            return Err(Mismatch {
                offset,
                expected: format!("{expected}: bytes {at}..{} = {}", at + 8, hex(&want)),
                found: format!("{} (the header is right, the payload differs)", hex(chunk)),
            });
        }
    }
    Ok(())
}

/// A keyed permutation of `0..n`: every index exactly once, in a seeded order, in O(1) memory.
/// A 4-round Feistel network on the smallest even power of two ≥ n, with cycle walking to stay
/// below n.
#[derive(Debug, Clone)]
pub struct Permutation {
    n: u64,
    half_bits: u32,
    mask: u64,
    keys: [u64; 4],
}

impl Permutation {
    pub fn new(n: u64, seed: u64) -> Self {
        let bits = (64 - n.saturating_sub(1).leading_zeros()).max(2);
        let half_bits = bits.div_ceil(2);
        let mut s = seed ^ 0x5045_524D;
        let keys = [
            splitmix(&mut s),
            splitmix(&mut s),
            splitmix(&mut s),
            splitmix(&mut s),
        ];
        Self {
            n,
            half_bits,
            mask: (1u64 << half_bits) - 1,
            keys,
        }
    }

    fn round(&self, x: u64, k: u64) -> u64 {
        let mut s = x ^ k;
        splitmix(&mut s) & self.mask
    }

    fn encrypt(&self, x: u64) -> u64 {
        let (mut l, mut r) = (x >> self.half_bits, x & self.mask);
        for k in self.keys {
            let t = r;
            r = l ^ self.round(r, k);
            l = t;
        }
        (l << self.half_bits) | r
    }

    /// The `i`-th index of the permutation (`i < n`).
    pub fn at(&self, i: u64) -> u64 {
        let mut x = i;
        loop {
            x = self.encrypt(x);
            if x < self.n {
                return x;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn permutation_visits_every_index_once() {
        for n in [1u64, 2, 3, 7, 64, 1000, 4097] {
            let p = Permutation::new(n, 42);
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let x = p.at(i) as usize;
                assert!(!seen[x], "n={n}: {x} twice");
                seen[x] = true;
            }
        }
        let a: Vec<u64> = (0..50).map(|i| Permutation::new(1000, 1).at(i)).collect();
        let b: Vec<u64> = (0..50).map(|i| Permutation::new(1000, 2).at(i)).collect();
        assert_ne!(a, b, "the seed changes the order");
        assert_ne!(a, (0..50).collect::<Vec<_>>(), "not the identity");
    }

    #[test]
    fn blocks_verify_and_mismatches_say_what_was_found() {
        let mut b = vec![0u8; 4096];
        fill_block(&mut b, 7, 3, 8192);
        assert!(check_block(&b, 7, 3, 8192).is_ok());
        let e = check_block(&b, 7, 3, 12288).unwrap_err();
        assert!(e.found.contains("file 3 at offset 8192"), "{e:?}");
        assert!(e.expected.contains("offset 12288"), "{e:?}");
        b[100] ^= 1;
        let e = check_block(&b, 7, 3, 8192).unwrap_err();
        assert!(e.found.contains("payload differs"), "{e:?}");
        let z = vec![0u8; 4096];
        let e = check_block(&z, 7, 3, 0).unwrap_err();
        assert!(e.found.contains("all zeros"), "{e:?}");
    }
}
