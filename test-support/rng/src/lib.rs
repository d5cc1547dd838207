//! A fixed-seed xorshift64* generator for tests and checks that want varied inputs which
//! reproduce on every run and machine, with no dependency. The unit tests use it as
//! `crate::test_rng` (`src/lib.rs`: the splitter's, the projector's scanner and cleaner); through
//! `herald_test_support::rng`, `tests/it/compaction_golden.rs`, `examples/compaction_corpus.rs`
//! and the fidelity transcripts (`test-support/src/fidelity/planted.rs`) do: the corpus digest
//! and the fidelity figures depend on this exact sequence, so a change here changes every seeded
//! case in all of them. A crate of its own, without herald, so the unit tests can link it.

pub struct Rng(pub u64);

impl Rng {
    /// Not `Iterator::next`: the generator never ends, and every caller wants the bare `u64`.
    #[allow(clippy::should_implement_trait)]
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
