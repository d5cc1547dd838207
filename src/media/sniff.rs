pub fn sniff(_b: &[u8]) -> Option<&'static str> {
    None
}
