//! The block distribution: which units (elements of a vector, rows of a matrix) each rank
//! holds.

use std::ops::Range;

/// `n` units over `ranks` ranks, in contiguous blocks in rank order; the first `n % ranks`
/// ranks hold one unit more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Blocks {
    n: usize,
    ranks: usize,
}

impl Blocks {
    pub(crate) fn new(n: usize, ranks: usize) -> Self {
        Blocks {
            n,
            ranks: ranks.max(1),
        }
    }

    /// The units rank `rank` holds.
    pub(crate) fn range(&self, rank: usize) -> Range<usize> {
        let (base, extra) = (self.n / self.ranks, self.n % self.ranks);
        let start = rank * base + rank.min(extra);
        start..start + base + usize::from(rank < extra)
    }

    /// Number of ranks.
    pub(crate) fn ranks(&self) -> usize {
        self.ranks
    }

    /// The rank holding unit `unit` (< n).
    pub(crate) fn owner(&self, unit: usize) -> usize {
        let (base, extra) = (self.n / self.ranks, self.n % self.ranks);
        let big = extra * (base + 1);
        if unit < big {
            unit / (base + 1)
        } else {
            extra + (unit - big) / base
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Blocks;

    #[test]
    fn blocks_cover_every_unit_once_in_order() {
        for n in [0, 1, 2, 5, 7, 16, 101] {
            for ranks in 1..=6 {
                let b = Blocks::new(n, ranks);
                let mut next = 0;
                for r in 0..ranks {
                    let range = b.range(r);
                    assert_eq!(range.start, next, "n {n} ranks {ranks} rank {r}");
                    for u in range.clone() {
                        assert_eq!(b.owner(u), r, "n {n} ranks {ranks} unit {u}");
                    }
                    next = range.end;
                }
                assert_eq!(next, n);
            }
        }
    }
}
