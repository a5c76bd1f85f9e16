// Declares `cfg(loom)` as expected so `unexpected_cfgs` stays quiet; the crate's
// Cargo.toml cannot carry a `[lints.rust]` table next to `[lints] workspace = true`.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(loom)");
    println!("cargo::rerun-if-changed=build.rs");
}
