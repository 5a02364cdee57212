//! The `cake` executable.

use clap::Parser;

fn main() {
    let cli = cake::cli::Cli::parse();
    if let Err(error) = cake::cli::main_with(cli) {
        eprintln!("error: {error:#}");
        std::process::exit(1);
    }
}
