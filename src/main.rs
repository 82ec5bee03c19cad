//! The `stowbench` binary: parse arguments, run, exit with the library's code.
//! A first Ctrl-C (or SIGTERM, SIGHUP: what `timeout`, systemd, `docker stop` and CI
//! cancellation send) stops the run after the current operation and keeps every finished case;
//! a second one exits at once. A second signal within `SAME_REQUEST_NS` of the first is the same
//! request delivered twice, not a second request: `timeout` sends its signal to its child and then
//! to its whole process group, and a wrapper script may pass on a Ctrl-C the terminal also sent.

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// How close behind the first a signal must arrive to count as that one again: far above the
/// microseconds between `timeout`'s two sends, below a person's second Ctrl-C after reading the
/// "Ctrl-C again to quit now" line.
const SAME_REQUEST_NS: u64 = 250_000_000;

fn main() {
    quiet_on_closed_stdout();
    let mut first_arrived_ns: Option<u64> = None;
    let _ = stowbench::signals::on_termination(move |arrived_ns| {
        match first_arrived_ns {
            None => first_arrived_ns = Some(arrived_ns),
            Some(first) if arrived_ns.saturating_sub(first) < SAME_REQUEST_NS => return,
            Some(_) => {}
        }
        if INTERRUPTED.swap(true, Ordering::SeqCst) {
            match stowbench::runner::left_behind_if_exiting_now() {
                Some(left) => stowbench::say!("stowbench: interrupted twice, exiting now: {left}"),
                None => stowbench::say!("stowbench: interrupted twice, exiting now"),
            }
            std::process::exit(stowbench::error::EXIT_INTERRUPTED);
        }
        stowbench::say!("stowbench: interrupted; finishing the current operation and writing the report (Ctrl-C again to quit now)");
        // Stops a running fio and unmounts/detaches what stowbench made for it (no-op otherwise).
        if let Err(e) = stowbench::fio::target::cleanup_all_registered() {
            stowbench::say!("stowbench: {e}");
        }
    });
    let code = stowbench::cli::main_with_args(std::env::args().collect(), &INTERRUPTED);
    std::process::exit(code);
}

/// `stowbench backends | head`: when the reader goes away, Rust reports the failed write as a
/// panic. Stop quietly instead, with the status a shell gives a process killed by SIGPIPE (141),
/// as other Unix tools do. (SIGPIPE itself stays ignored: a server closing a connection must be
/// an error the backend reports, never the death of the process.)
fn quiet_on_closed_stdout() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info.payload().downcast_ref::<String>().map(String::as_str).unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        default_hook(info);
    }));
}
