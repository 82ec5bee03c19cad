//! Stand-alone entry to `stowbench fio` until the core's CLI wires the subcommand in:
//! `cargo run --release --example fio -- --fs xfs,ext4 --rw randread --iodepth 1..8 --runtime 3s`.
//! It installs the Ctrl-C handler the core will own: stop fio and undo mounts and loop devices.

use clap::Parser;
use stowbench::fio::cli::{run, FioArgs};

#[derive(Parser)]
#[command(name = "stowbench-fio", about = "fio sweeps driven by stowbench")]
struct Cli {
    #[command(flatten)]
    args: FioArgs,
}

fn main() {
    let cli = Cli::parse();
    let handler = ctrlc::set_handler(|| {
        if let Err(e) = stowbench::fio::target::cleanup_all_registered() {
            eprintln!("stowbench: {e}");
        }
    });
    if let Err(e) = handler {
        eprintln!("stowbench: cannot install the Ctrl-C handler: {e}");
    }
    let code = match run(&cli.args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("stowbench fio: {message}");
            2
        }
    };
    std::process::exit(code);
}
