//! The `stowbench` binary: parse arguments, run, exit with the library's code.
//! A first Ctrl-C stops the run after the current operation and keeps every finished case;
//! a second one exits at once.

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

fn main() {
    let _ = ctrlc::set_handler(|| {
        if INTERRUPTED.swap(true, Ordering::SeqCst) {
            eprintln!("stowbench: interrupted twice, exiting now");
            std::process::exit(130);
        }
        eprintln!("stowbench: interrupted; finishing the current operation and writing the report (Ctrl-C again to quit now)");
        // Stops a running fio and unmounts/detaches what stowbench made for it (no-op otherwise).
        if let Err(e) = stowbench::fio::target::cleanup_all_registered() {
            eprintln!("stowbench: {e}");
        }
    });
    let code = stowbench::cli::main_with_args(std::env::args().collect(), &INTERRUPTED);
    std::process::exit(code);
}
