//! The `interop-lab` command line: the window (default), each demo as a command (window or
//! headless), `bench`, `doctor` and `soak`. Each demo's flags live in its folder; this file only
//! puts the commands together and runs them.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use interop_lab::args::RunArgs;
use interop_lab::bench::map::MapBenchArgs;
use interop_lab::bench::transfer::TransferBenchArgs;
use interop_lab::demo_kit::DemoSpec;
use interop_lab::demos::{DemoBenchCommand, DemoCommand};
use interop_lab::doctor::DoctorArgs;
use interop_lab::headless::{self, HeadlessOptions};
use interop_lab::soak::SoakArgs;
use interop_lab::stats::Stage;
use interop_lab::stop::{Outputs, StopRequest};
use interop_lab::{Error, Result, app, bench};

/// See CUDA and OpenGL or Vulkan work on the same memory.
///
/// With no command, opens the window on the default demo. Each demo is also a command with
/// its own settings; add --headless to render offscreen and write a PNG and timings.
#[derive(Parser, Debug)]
#[command(name = "interop-lab", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    #[command(flatten)]
    Demo(DemoCommand),
    /// Explain what this machine can run: driver, NVRTC, devices, GL contexts, the path the app
    /// takes and how to fix what is missing. Exit 0: interop works; 1: fallback; 2: cannot render.
    Doctor(DoctorArgs),
    /// Measure speed: kernels with CUDA events (median after warm-up), whole frames headless.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Run many interop frames, re-allocations and kernel recompiles; check that device memory,
    /// host memory and GL objects stay within bounds. Exit 0: within bounds; 1: something grew.
    Soak(SoakArgs),
}

#[derive(Subcommand, Debug)]
enum BenchCommand {
    #[command(flatten)]
    Demo(DemoBenchCommand),
    /// What each transfer path (interop, external memory, pinned / pageable copy, CPU) costs per frame.
    Transfer(TransferBenchArgs),
    /// What cuGraphicsMapResources costs and what it waits for: the map timed under conditions
    /// that differ in one thing each (GL work on the buffer, elsewhere, a wait, a ring of buffers).
    Map(MapBenchArgs),
    /// What recording the frame anatomy costs per frame: off, recorded, and shown in the panel.
    Anatomy(bench::anatomy::AnatomyBenchArgs),
    /// What one hand-off between two GPU queues costs here (CUDA streams, CUDA contexts, CUDA,
    /// Vulkan, GL), apart from any demo: chains of round trips with tiny commands, no host wait.
    Handoff(bench::handoff::HandoffBenchArgs),
}

fn main() -> ExitCode {
    interop_lab::stats::mark_program_start();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn,interop_lab=info")).init();
    let cli = Cli::parse();
    let stop = StopRequest::new();
    // Ctrl-C, SIGTERM or SIGHUP: finish the current frame (or benchmark step), write what was
    // asked for, exit with 128 + the signal. A second one exits at once.
    install_signal_handler(&stop);
    match run(cli, &stop) {
        // An interrupted run says so in its exit status, whatever it finished with.
        Ok(code) => stop.exit_status().map(ExitCode::from).unwrap_or(code),
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(1)
        }
    }
}

/// Turns SIGINT, SIGTERM and SIGHUP into a [`StopRequest`], on a thread of its own.
fn install_signal_handler(stop: &StopRequest) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = match signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) {
        Ok(signals) => signals,
        Err(error) => {
            log::warn!("Ctrl-C will end the app without writing its outputs: {error}");
            return;
        }
    };
    let stop = stop.clone();
    let spawned = std::thread::Builder::new().name("signals".to_owned()).spawn(move || {
        for signal in signals.forever() {
            if stop.request(signal) {
                let outputs = match stop.give_up_outputs() {
                    Outputs::NotBegun => "without writing",
                    Outputs::Writing => "part-way through writing the outputs: those not finished are not written",
                    Outputs::Written => "(the outputs are written)",
                };
                eprintln!("\ninterrupted again: exiting {outputs}");
                // `_exit`, not `exit`: libraries' exit handlers (Mesa joins its threads) take tens
                // of ms, in which the main thread would go on and write what was just given up.
                signal_hook::low_level::exit(128 + signal);
            }
            eprintln!(
                "\ninterrupted ({}): finishing the current frame, then writing what was asked for (again to quit now)",
                stop.cause()
            );
        }
    });
    if let Err(error) = spawned {
        log::warn!("Ctrl-C will end the app without writing its outputs: {error}");
    }
}

fn run(cli: Cli, stop: &StopRequest) -> Result<ExitCode> {
    match cli.command {
        None => run_demo(&cli.run, interop_lab::demos::default_spec("nbody")?, stop),
        Some(Command::Demo(command)) => {
            let (run, spec) = command.run()?;
            run_demo(&run, spec, stop)
        }
        Some(Command::Doctor(args)) => {
            let (text, code) = args.run();
            print!("{text}");
            Ok(ExitCode::from(code))
        }
        Some(Command::Soak(args)) => {
            let (table, within_bounds) = args.run(stop)?;
            print!("{table}");
            Ok(if within_bounds { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        Some(Command::Bench(BenchCommand::Demo(command))) => {
            print!("{}", command.run(&bench::headless_frames, stop)?.table);
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Bench(BenchCommand::Transfer(args))) => {
            print!("{}", bench::transfer::run(&args.options(stop))?.table);
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Bench(BenchCommand::Anatomy(args))) => {
            print!("{}", bench::anatomy::run(&args, stop)?.table);
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Bench(BenchCommand::Handoff(args))) => {
            print!("{}", bench::handoff::run(&args, stop)?.table);
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Bench(BenchCommand::Map(args))) => {
            print!("{}", bench::map::run(&args, stop)?.table);
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn run_demo(run: &RunArgs, spec: DemoSpec, stop: &StopRequest) -> Result<ExitCode> {
    // Every file the run will write is checked first: a bad path fails now, not after the run.
    run.check_outputs()?;
    spec.check_outputs()?;
    run.cuda.check_folders()?;
    let path_flags: Vec<_> = run.path_flags.iter().cloned().chain(run.cuda.kernels_flag()).collect();
    if run.headless {
        let options = HeadlessOptions {
            renderer: run.renderer,
            frames: run.frames.or(spec.headless_frames()).unwrap_or(120),
            spec,
            size: run.size,
            dt: run.frame_time,
            screenshot: run.screenshot.clone(),
            stats: run.stats.clone(),
            trace: run.trace(),
            panel: run.panel,
            cuda: run.cuda.options(),
            shaders_dir: run.cuda.shaders.clone(),
            what_if: run.what_if(),
            open_sections: run.panel_open.clone(),
            stop: stop.clone(),
            record: run.record.clone(),
            path_flags,
            progress: true,
        };
        let report = headless::run(&options)?;
        print_headless(&report, &options);
        if let Some(recording) = &report.recording {
            println!("{}", recording.summary(60));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let report = app::run(app::WindowOptions {
        spec,
        cuda: run.cuda.options(),
        size: run.size,
        vsync: run.vsync,
        shaders_dir: run.cuda.shaders.clone(),
        max_frames: run.frames.map(u64::from),
        screenshot: run.screenshot.clone(),
        what_if: run.what_if(),
        open_sections: run.panel_open.clone(),
        stop: stop.clone(),
        record: run.record.clone(),
        stats: run.stats.clone(),
        trace: run.trace(),
        renderer: run.renderer,
        path_flags,
    })?;
    for recording in &report.recordings {
        println!("{}", recording.summary(60));
    }
    log::info!("closed after {} frames", report.frames);
    if report.relaunch {
        return relaunch();
    }
    Ok(ExitCode::SUCCESS)
}

fn print_headless(report: &headless::HeadlessReport, options: &HeadlessOptions) {
    let json = &report.json;
    let text = |key: &str| json.get(key).and_then(|v| v.as_str()).unwrap_or("?").to_owned();
    let device = json.pointer("/device/name").and_then(|v| v.as_str()).unwrap_or("no CUDA device");
    let graphics = json.pointer("/graphics/device").and_then(|v| v.as_str()).unwrap_or("?");
    let api = if text("renderer") == "vulkan" { "Vulkan" } else { "OpenGL" };
    println!(
        "{} on {} ({}), drawn with {api} on {graphics}, transfer {}: {} frames at {}x{}, {:.*} frames/s",
        text("demo"),
        text("backend"),
        device,
        text("transfer"),
        report.frames,
        options.size[0],
        options.size[1],
        // A slow run (n-body on the CPU) says 0.08, not 0.
        if report.frames_per_second < 10.0 { 2 } else { 0 },
        report.frames_per_second
    );
    println!("{:<9} {:>22} {:>22}", "stage", "host µs median / p90", "GPU µs median / p90");
    for stage in Stage::ALL {
        let Some(times) = report.summary.stage(stage) else {
            continue;
        };
        let cell = |p: Option<interop_lab::stats::Percentiles>| {
            p.map(|p| format!("{:.1} / {:.1}", p.median, p.p90)).unwrap_or_else(|| "–".to_owned())
        };
        println!("{:<9} {:>22} {:>22}", stage.name(), cell(times.host_us), cell(times.gpu_us));
    }
    for (what, path) in [("screenshot", &options.screenshot), ("stats", &options.stats)] {
        if let Some(path) = path {
            println!("{what}: {}", path.display());
        }
    }
}

/// Replaces this process by a new run of the app with the same arguments: after a kernel fault
/// the driver allows no more CUDA work in a process, and a new one gets a fresh context.
fn relaunch() -> Result<ExitCode> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().map_err(|e| Error::io("the running executable", e))?;
    log::info!("relaunching {}", exe.display());
    let error = std::process::Command::new(&exe).args(std::env::args_os().skip(1)).exec();
    Err(Error::io(exe, error))
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    #[test]
    fn command_line_definition_is_consistent() {
        // Catches duplicate flag names among flattened option groups, among other mistakes.
        super::Cli::command().debug_assert();
    }

    #[test]
    fn every_flag_that_takes_a_number_says_its_range_and_default_in_its_help_and_refuses_nan() {
        let missing = interop_lab::numbers::flags_without_a_stated_range(&super::Cli::command());
        assert!(missing.is_empty(), "{} flags:\n{}", missing.len(), missing.join("\n"));
    }

    #[test]
    fn every_flag_that_takes_a_number_reads_into_the_type_of_its_field() {
        let samples = interop_lab::numbers::numeric_flag_samples(&super::Cli::command());
        let unread: Vec<_> = samples
            .iter()
            .filter(|words| !matches!(std::panic::catch_unwind(|| super::Cli::try_parse_from(*words)), Ok(Ok(_))))
            .collect();
        assert!(unread.is_empty(), "these do not read into their fields (parser and field types differ): {unread:?}");
    }
}
