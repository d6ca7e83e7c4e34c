//! The setsum of one item: SHA3-256 of the item's pieces, each 4-byte
//! little-endian column of the hash reduced into its prime field.
//!
//! With the `asm` feature (the default) the hash is computed by the
//! `keccak-asm` crate's assembly SHA3-256 and the reduced hash becomes a
//! setsum through [`Setsum::from_digest`]; without it, `setsum` hashes the
//! pieces itself. Both give the same setsum (tested below against
//! `Setsum::insert_vectored`).

use setsum::Setsum;

/// The prime of each column of a setsum (the `setsum` 0.8 format: eight
/// columns, each a little-endian `u32` taken modulo its prime).
#[cfg_attr(not(feature = "asm"), allow(dead_code))]
const PRIMES: [u32; 8] = [
    4_294_967_291,
    4_294_967_279,
    4_294_967_231,
    4_294_967_197,
    4_294_967_189,
    4_294_967_161,
    4_294_967_143,
    4_294_967_111,
];

/// Reduces each column of a SHA3-256 hash into its prime field, which is
/// what a setsum of the one hashed item holds.
#[cfg_attr(not(feature = "asm"), allow(dead_code))]
fn reduce(mut hash: [u8; 32]) -> [u8; 32] {
    for (column, prime) in hash.chunks_exact_mut(4).zip(PRIMES) {
        let mut le = [0u8; 4];
        le.copy_from_slice(column);
        let value = u32::from_le_bytes(le);
        if value >= prime {
            column.copy_from_slice(&(value - prime).to_le_bytes());
        }
    }
    hash
}

/// The setsum holding exactly the item whose bytes are the concatenation
/// of `pieces`.
#[cfg(feature = "asm")]
pub(crate) fn item_of_pieces(pieces: &[&[u8]]) -> Setsum {
    use keccak_asm::{Digest, Sha3_256};
    let mut hasher = Sha3_256::new();
    for piece in pieces {
        hasher.update(piece);
    }
    Setsum::from_digest(reduce(hasher.finalize().into()))
}

/// The setsum holding exactly the item whose bytes are the concatenation
/// of `pieces`.
#[cfg(not(feature = "asm"))]
pub(crate) fn item_of_pieces(pieces: &[&[u8]]) -> Setsum {
    let mut setsum = Setsum::default();
    setsum.insert_vectored(pieces);
    setsum
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use setsum::Setsum;

    use super::{PRIMES, item_of_pieces, reduce};

    fn by_setsum(pieces: &[&[u8]]) -> Setsum {
        let mut setsum = Setsum::default();
        setsum.insert_vectored(pieces);
        setsum
    }

    #[test]
    fn the_primes_are_the_setsum_crates() {
        // Adding 2^31 to 2^31 in column i wraps at its prime p_i and leaves
        // 2^32 - p_i: the public arithmetic tells each prime.
        let half = Setsum::from_digest([0, 0, 0, 0x80].repeat(8).try_into().unwrap_or([0; 32]));
        let wrapped = (half + half).digest();
        for (column, prime) in wrapped.chunks_exact(4).zip(PRIMES) {
            let value = u32::from_le_bytes([column[0], column[1], column[2], column[3]]);
            assert_eq!(u64::from(value), (1u64 << 32) - u64::from(prime));
        }
    }

    #[test]
    fn columns_at_or_above_their_prime_are_reduced_and_others_kept() {
        let mut hash = [0xffu8; 32];
        // Column 1 exactly its prime, column 2 one below it.
        hash[4..8].copy_from_slice(&PRIMES[1].to_le_bytes());
        hash[8..12].copy_from_slice(&(PRIMES[2] - 1).to_le_bytes());
        let reduced = reduce(hash);
        let column = |i: usize| {
            u32::from_le_bytes([
                reduced[4 * i],
                reduced[4 * i + 1],
                reduced[4 * i + 2],
                reduced[4 * i + 3],
            ])
        };
        assert_eq!(column(0), u32::MAX - PRIMES[0]);
        assert_eq!(column(1), 0);
        assert_eq!(column(2), PRIMES[2] - 1);
        assert_eq!(column(7), u32::MAX - PRIMES[7]);
        // A reduced item adds like the one `setsum` builds: the item and
        // its removal cancel.
        let item = Setsum::from_digest(reduced);
        assert_eq!(item - item, Setsum::default());
    }

    #[test]
    fn empty_and_large_items_hash_as_setsum_does() {
        assert_eq!(item_of_pieces(&[]), by_setsum(&[]));
        assert_eq!(item_of_pieces(&[b""]), by_setsum(&[b""]));
        // Across SHA3-256's 136-byte rate and a 64 KiB body.
        let big: Vec<u8> = (0..65_536u32).map(|i| (i * 31 % 251) as u8).collect();
        for len in [1, 135, 136, 137, 272, 4096, 65_536] {
            let slice = &big[..len];
            assert_eq!(
                item_of_pieces(&[slice]),
                by_setsum(&[slice]),
                "length {len}"
            );
            assert_eq!(
                item_of_pieces(&[b"head", slice, b"tail"]),
                by_setsum(&[b"head", slice, b"tail"]),
                "pieces around length {len}"
            );
        }
    }

    proptest! {
        #[test]
        fn any_pieces_hash_as_setsum_does(
            pieces in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..400), 0..5)
        ) {
            let slices: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
            prop_assert_eq!(item_of_pieces(&slices), by_setsum(&slices));
        }
    }
}
