//! Benchmarks and long runs end when asked: an output path that cannot be written is refused
//! before any work, and Ctrl-C or SIGTERM stops a run within one frame or one measurement, which
//! then prints and writes what it measured, marked `"interrupted": true`, and exits 128 + the
//! signal. The CPU backend runs `bench transfer`, `bench anatomy`, `bench nbody` and `bench blur`
//! here; the CUDA rows share their stop checks (`demo_kit::bench::Repeats`) and their report
//! (`BenchReport::finish`), and the GPU test below runs them on a GPU machine.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{Watched, binary, temp_dir};

/// How long a run may take to end after the signal: one frame or measurement and the writing,
/// with room for a loaded 2-core machine (before, the runs went on for minutes).
const STOPS_WITHIN: Duration = Duration::from_secs(10);

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn bench(args: &[&str]) -> Command {
    let mut command = binary();
    command.arg("bench").args(args).env_remove("DISPLAY");
    command
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).expect("the JSON was written")).expect("JSON")
}

/// Starts `command` and waits for its progress (`task: …` on standard error) to show that it runs.
fn started(command: Command, task: &str) -> Watched {
    let mut watched = Watched::start(command);
    let prefix = format!("{task}: ");
    let said = watched.wait_for_line(|line| line.starts_with(&prefix), Duration::from_secs(60));
    assert!(said, "{task} never showed its progress: {}", watched.stderr());
    watched
}

/// Sends `signal` and waits for the run to end, which must come within [`STOPS_WITHIN`].
fn stop(watched: Watched, signal: &str) -> Output {
    watched.signal(signal);
    let signalled = Instant::now();
    let output = watched.finish(Duration::from_secs(60));
    let took = signalled.elapsed();
    assert!(took < STOPS_WITHIN, "SIG{signal}: the run went on {took:?} (bound {STOPS_WITHIN:?}): {}", stderr(&output));
    output
}

#[test]
fn every_bench_and_the_soak_refuse_a_json_path_in_a_missing_folder_before_any_work() {
    let dir = temp_dir("bench-missing-folder");
    let missing = dir.join("missing");
    let json = missing.join("b.json");
    let json = json.to_str().expect("a UTF-8 path");
    // Each would run for a minute or more (or, without CUDA, fail for another reason) if the
    // path were checked after the work.
    let runs: [&[&str]; 7] = [
        &["bench", "transfer", "--backend", "cpu", "--frames", "10000"],
        &["bench", "anatomy", "--backend", "cpu", "--frames", "100000", "--size", "64x64"],
        &["bench", "nbody", "--backend", "cpu", "--bodies", "65536"],
        &["bench", "blur", "--backend", "cpu", "--repeats", "1000"],
        &["bench", "map", "--frames", "10000"],
        &["bench", "handoff", "--rounds", "10000"],
        &["soak", "--transfer", "cpu", "--frames", "100000000"],
    ];
    for args in runs {
        let mut command = binary();
        command.args(args).args(["--json", json]).env_remove("DISPLAY");
        let output = Watched::start(command).finish(Duration::from_secs(20));
        let said = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{args:?}: refused with a message: {said}");
        assert!(said.contains(&format!("the folder {} does not exist", missing.display())), "{args:?}: {said}");
        // Progress says "TASK: N/M done" from the first step on: none may have started.
        assert!(!said.contains(" done, "), "{args:?}: work began before the refusal: {said}");
    }
    assert!(!missing.exists(), "nothing was made");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bench_transfer_stops_within_a_frame_of_ctrl_c_and_keeps_the_rows_it_measured() {
    let dir = temp_dir("bench-transfer-stop");
    let json = dir.join("transfer.json");
    // The 4 KiB row takes a fraction of a second; the 16 MiB row of 10,000 frames about a
    // minute on two cores, and it is interrupted once the progress line says the first is done
    // (at most five seconds after: the line that comes while work goes on).
    let mut command = bench(&["transfer", "--backend", "cpu", "--path", "cpu", "--bytes", "4K,16M"]);
    command.args(["--frames", "10000", "--warmup", "1", "--json"]).arg(&json);
    let mut watched = started(command, "bench transfer");
    let first_row_done = |line: &str| line.starts_with("bench transfer: 1/2 done");
    assert!(watched.wait_for_line(first_row_done, Duration::from_secs(60)), "{}", watched.stderr());
    let output = stop(watched, "INT");
    let table = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(130), "128 + SIGINT: {table}{}", stderr(&output));
    assert!(table.contains("stopped (Ctrl-C)") && table.contains("frame µs"), "the table of what ran: {table}");
    assert!(!table.contains("NaN"), "{table}");
    let report = read_json(&json);
    assert_eq!(report["interrupted"], true, "{report:#}");
    let rows = report["results"].as_array().expect("results");
    assert_eq!(rows.len(), 1, "the 4 KiB row, measured whole; not the interrupted one: {report:#}");
    assert_eq!(rows[0]["bytes"], 4096);
    assert!(rows[0]["frame_us"]["median"].as_f64().is_some_and(f64::is_finite), "{report:#}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bench_anatomy_stops_within_a_frame_of_sigterm_and_marks_its_json() {
    let dir = temp_dir("bench-anatomy-stop");
    let json = dir.join("anatomy.json");
    let mut command = bench(&["anatomy", "--backend", "cpu", "--size", "64x64", "--frames", "100000", "--json"]);
    command.arg(&json);
    let watched = started(command, "bench anatomy");
    std::thread::sleep(Duration::from_millis(500));
    let output = stop(watched, "TERM");
    let table = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(143), "128 + SIGTERM: {table}{}", stderr(&output));
    assert!(table.contains("stopped (SIGTERM)") && table.contains("nothing recorded"), "{table}");
    let report = read_json(&json);
    assert_eq!(report["interrupted"], true, "{report:#}");
    let rows = report["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 1, "the mode it was in: {report:#}");
    let frames = rows[0]["frames"].as_u64().expect("frames");
    assert!((1..100_000).contains(&frames), "the frames that ran: {report:#}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_cpu_nbody_bench_stops_within_part_of_a_pass_of_sigterm() {
    let dir = temp_dir("bench-nbody-stop");
    let json = dir.join("nbody.json");
    // 32,768 bodies: an accelerations pass takes about a second on two cores, and 20 of them
    // are asked for.
    let mut command = bench(&["nbody", "--backend", "cpu", "--bodies", "32768", "--frames", "0"]);
    command.args(["--warmup", "0", "--repeats", "20", "--json"]).arg(&json);
    let watched = started(command, "bench nbody (CPU)");
    std::thread::sleep(Duration::from_millis(1500));
    let output = stop(watched, "TERM");
    let table = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(143), "128 + SIGTERM: {table}{}", stderr(&output));
    assert!(table.contains("stopped (SIGTERM)"), "{table}");
    let report = read_json(&json);
    assert_eq!(report["interrupted"], true, "{report:#}");
    // The passes timed before the signal are kept, counted; a pass cut short is not.
    for size in report["sizes"].as_array().expect("sizes") {
        let passes = size["timed_passes"].as_u64().expect("timed passes");
        assert!((1..20).contains(&passes), "{size}");
        assert!(size["forces_us"]["median"].as_f64().is_some_and(|m| m > 0.0), "{size}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bench_blur_on_the_cpu_says_it_writes_no_traces_and_makes_no_folder() {
    let dir = temp_dir("bench-blur-traces");
    let traces = dir.join("traces");
    let output = bench(&["blur", "--backend", "cpu", "--size", "64x64", "--sigma", "3", "--variant", "box"])
        .args(["--repeats", "1", "--trace-dir"])
        .arg(&traces)
        .output()
        .expect("run");
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), stderr(&output));
    assert!(output.status.success(), "{said}");
    assert!(said.contains("--trace-dir") && said.contains("no traces"), "said, not silent: {said}");
    assert!(!traces.exists(), "no empty folder is made");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn the_cuda_benches_stop_within_a_measurement_of_a_signal() {
    let dir = temp_dir("gpu-bench-stop");
    // Each asks for minutes of work; the signal comes once its progress shows it runs.
    let runs: [(&str, &[&str], &str); 5] = [
        ("bench transfer", &["transfer", "--bytes", "64M", "--frames", "10000"], "INT"),
        ("bench map", &["map", "--frames", "10000"], "TERM"),
        ("bench handoff", &["handoff", "--rounds", "10000", "--batches", "100"], "INT"),
        ("bench nbody", &["nbody", "--bodies", "262144", "--repeats", "2000"], "TERM"),
        ("bench blur", &["blur", "--repeats", "2000"], "INT"),
    ];
    for (task, args, signal) in runs {
        let json = dir.join(format!("{}.json", task.replace(' ', "-")));
        let mut command = bench(args);
        command.args(["--backend", "cuda", "--json"]).arg(&json);
        let watched = started(command, task);
        std::thread::sleep(Duration::from_millis(500));
        watched.signal(signal);
        let signalled = Instant::now();
        let output = watched.finish(Duration::from_secs(60));
        let took = signalled.elapsed();
        let expected = if signal == "INT" { 130 } else { 143 };
        assert_eq!(output.status.code(), Some(expected), "{task}: {}", stderr(&output));
        assert!(took < Duration::from_secs(10), "{task}: went on {took:?} after SIG{signal}");
        assert_eq!(read_json(&json)["interrupted"], true, "{task}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
