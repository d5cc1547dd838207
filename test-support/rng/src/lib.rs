//! A fixed-seed xorshift64* generator for tests and checks that want varied inputs which
//! reproduce on every run and machine, with no dependency. Used as `crate::test_rng`
//! for the unit tests (`src/lib.rs`: the splitter's, the projector's scanner and cleaner), and by
//! `tests/it/compaction_golden.rs`, `examples/compaction_corpus.rs` and the fidelity transcripts
//! (`test-support/src/fidelity/planted.rs`): the corpus digest and the fidelity figures depend on this
//! exact sequence, so a change here changes every seeded case in all of them.
//! A crate of its own, with no herald in it, so that herald's unit tests can link it too.
#![allow(clippy::should_implement_trait)] // `next` is not `Iterator::next`: it never ends.

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform enough in `0..n` for test inputs (modulo bias is irrelevant here).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}
