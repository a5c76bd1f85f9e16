//! The `ringkv-bench` binary; everything lives in the library (see lib.rs).

fn main() {
    std::process::exit(ringkv_bench::main_cli());
}
