//! The `harn` binary: parses the command line and hands off to the library.

fn main() {
    std::process::exit(harn::cli::main());
}
