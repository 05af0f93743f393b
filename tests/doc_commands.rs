//! Every `interop-lab` command line in README.md and docs/ is tried against the CLI, so that a page
//! cannot drift from it:
//! - a concrete line (no `[optional]`, `<placeholder>`, `a|b` or `FILE`) runs as written, in a
//!   scratch folder holding the input files it names; a window run closes itself after a few
//!   frames (`--frames 3` is added where the line gives no `--frames`);
//! - a synopsis line has each flag it names, and each value it lists, checked against the
//!   subcommand's `--help`.
//!
//! A line whose comment (or, for a span in prose, whose paragraph) says it needs CUDA is run only
//! where `INTEROP_LAB_DOC_COMMANDS=cuda` (scripts/gpu-check, on the GPU machine, where window lines
//! run headless for want of a display); everywhere else it is listed as skipped, with the reason.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

mod common;

use std::path::{Path, PathBuf};

/// What a command line needs to run, as its page says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Needs {
    /// Any machine: CI runs it.
    Nothing,
    /// "needs CUDA": the GPU machine runs it.
    Cuda,
    /// "needs two CUDA devices": no machine the checks run on has them; listed as skipped.
    TwoDevices,
}

/// One command line found in a page.
#[derive(Debug, Clone)]
struct DocCommand {
    /// `README.md:158`, for messages.
    place: String,
    /// The words after `interop-lab`, comments removed.
    words: Vec<String>,
    /// What its comment (or paragraph) says it needs.
    needs: Needs,
}

impl DocCommand {
    /// A synopsis shows choices rather than one command: optional parts, placeholders,
    /// alternatives, or file names left to the reader.
    fn is_synopsis(&self) -> bool {
        self.words.iter().any(|word| {
            word.contains(['[', ']', '<', '>', '|', '…'])
                || matches!(word.as_str(), "FILE" | "N" | "DIR" | "SECTIONS" | "SWITCHES" | "FILE.json" | "FILE.png")
        })
    }
}

/// The project's root: where the pages are. Test executables may run far from where they were
/// built (the GPU machine), from the project's root.
fn root() -> PathBuf {
    let built_in = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    if built_in.join("README.md").is_file() { built_in } else { PathBuf::from(".") }
}

fn pages(root: &Path) -> Vec<PathBuf> {
    let mut pages = vec![root.join("README.md")];
    let mut folders = vec![root.join("docs")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("docs/ can be listed").filter_map(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    pages.sort();
    pages
}

/// The command lines of one page: code lines (indented or fenced) that start with `interop-lab`,
/// with the lines that continue them (starting with `[`), and inline code spans in prose that
/// start with `interop-lab ` and name at least one flag.
fn commands_in(page: &Path, name: &str) -> Vec<DocCommand> {
    let text = std::fs::read_to_string(page).expect("a page can be read");
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut fenced = false;
    let mut paragraph = String::new();
    let mut paragraph_start = 0;
    for (index, line) in lines.iter().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let code = fenced || line.starts_with("    ");
        let trimmed = line.trim();
        // `interop-lab = { … }` is a Cargo.toml dependency line, not a command.
        let command =
            trimmed == "interop-lab" || (trimmed.starts_with("interop-lab ") && !trimmed.starts_with("interop-lab ="));
        if code && command {
            let mut whole = trimmed.to_owned();
            for next in &lines[index + 1..] {
                let next = next.trim();
                if !next.starts_with('[') {
                    break;
                }
                whole.push(' ');
                whole.push_str(next);
            }
            found.push(parse(&whole, format!("{name}:{}", index + 1)));
        }
        if code || trimmed.is_empty() {
            spans_of(&paragraph, name, paragraph_start, &mut found);
            paragraph.clear();
        } else {
            if paragraph.is_empty() {
                paragraph_start = index + 1;
            }
            paragraph.push_str(trimmed);
            paragraph.push(' ');
        }
    }
    spans_of(&paragraph, name, paragraph_start, &mut found);
    found
}

fn spans_of(paragraph: &str, name: &str, line: usize, found: &mut Vec<DocCommand>) {
    for (index, span) in paragraph.split('`').enumerate() {
        if index % 2 == 1 && span.starts_with("interop-lab ") && span.contains(" --") {
            let mut command = parse(span, format!("{name}:{line}"));
            command.needs = needs_of(paragraph);
            found.push(command);
        }
    }
}

fn needs_of(text: &str) -> Needs {
    if text.contains("two CUDA devices") {
        Needs::TwoDevices
    } else if text.contains("needs CUDA") || text.contains("need CUDA") {
        Needs::Cuda
    } else {
        Needs::Nothing
    }
}

fn parse(line: &str, place: String) -> DocCommand {
    let (command, comment) = match line.find(" #") {
        Some(at) => (&line[..at], &line[at..]),
        None => (line, ""),
    };
    let words = command.split_whitespace().skip(1).map(str::to_owned).collect();
    DocCommand { place, words, needs: needs_of(comment) }
}

fn all_commands() -> Vec<DocCommand> {
    let root = root();
    let mut all = Vec::new();
    for page in pages(&root) {
        let name = page.strip_prefix(&root).unwrap_or(&page).display().to_string();
        all.extend(commands_in(&page, &name));
    }
    all
}

/// The subcommand words a line starts with, as each demo or command it stands for (`<demo>`:
/// every demo; `<wave|nbody>`: those two).
fn subcommands(words: &[String]) -> Vec<Vec<String>> {
    let leading: Vec<&String> = words.iter().take_while(|w| !w.starts_with('-') && !w.starts_with('[')).collect();
    let mut paths = vec![Vec::new()];
    for word in leading {
        let choices: Vec<String> = if word == "<demo>" {
            ["nbody", "blur", "wave"].map(str::to_owned).to_vec()
        } else {
            word.trim_matches(['<', '>']).split('|').map(str::to_owned).collect()
        };
        paths = paths
            .into_iter()
            .flat_map(|path| {
                choices.iter().map(move |choice| {
                    let mut longer = path.clone();
                    longer.push(choice.clone());
                    longer
                })
            })
            .collect();
    }
    paths
}

fn help_of(subcommand: &[String]) -> String {
    let run = common::binary().args(subcommand).arg("--help").output().expect("run interop-lab --help");
    assert!(
        run.status.success(),
        "interop-lab {} --help: {}",
        subcommand.join(" "),
        String::from_utf8_lossy(&run.stderr)
    );
    String::from_utf8_lossy(&run.stdout).into_owned()
}

/// What a synopsis line says that the CLI must agree with: each flag, and each value listed as
/// a choice (`a|b|c`, or a comma list of names).
fn synopsis_disagreements(command: &DocCommand) -> Vec<String> {
    let mut wrong = Vec::new();
    for subcommand in subcommands(&command.words) {
        let help = help_of(&subcommand);
        let mut previous_flag: Option<String> = None;
        for word in &command.words {
            let word = word.trim_matches(['[', ']']);
            if let Some(flag) = word.strip_prefix("--") {
                let flag = flag.split('=').next().unwrap_or(flag);
                if !help.contains(&format!("--{flag}")) {
                    wrong.push(format!(
                        "{}: `interop-lab {}` has no flag --{flag}",
                        command.place,
                        subcommand.join(" ")
                    ));
                }
                previous_flag = Some(flag.to_owned());
                continue;
            }
            let Some(flag) = previous_flag.take() else { continue };
            let listed: Vec<&str> = if word.contains('|') { word.split('|').collect() } else { vec![word] };
            for value in listed {
                let names_a_choice = value.chars().all(|c| c.is_ascii_lowercase() || c == '-' || c == ',')
                    && value.chars().any(|c| c.is_ascii_lowercase());
                if names_a_choice && help.contains("possible values") {
                    for choice in value.split(',') {
                        if !help.contains(choice) {
                            wrong.push(format!(
                                "{}: --{flag} {choice} is not a value `interop-lab {}` takes",
                                command.place,
                                subcommand.join(" ")
                            ));
                        }
                    }
                }
            }
        }
    }
    wrong
}

/// Input files a concrete line reads, made in `dir`: images named by `--image`.
fn make_inputs(words: &[String], dir: &Path) {
    for pair in words.windows(2) {
        if pair[0] == "--image" {
            let image = image::RgbaImage::from_fn(96, 64, |x, y| image::Rgba([(x * 2) as u8, (y * 3) as u8, 128, 255]));
            image.save(dir.join(&pair[1])).expect("an input image is written");
        }
    }
}

fn opens_a_window(words: &[String]) -> bool {
    matches!(words.first().map(String::as_str), None | Some("nbody" | "blur" | "wave" | "--renderer"))
        && !words.iter().any(|w| w == "--headless")
}

fn run(command: &DocCommand, dir: &Path, headless_windows: bool) -> Result<(), String> {
    let mut words = command.words.clone();
    if opens_a_window(&words) && !words.iter().any(|w| w == "--frames") {
        words.extend(["--frames", "3"].map(str::to_owned));
    }
    if headless_windows && opens_a_window(&words) {
        words.push("--headless".to_owned());
    }
    make_inputs(&words, dir);
    let started = std::time::Instant::now();
    let run = common::binary().args(&words).current_dir(dir).output().map_err(|e| e.to_string())?;
    eprintln!("{}: interop-lab {} — {:?}", command.place, words.join(" "), started.elapsed());
    // doctor's status is its verdict (1: CUDA cannot run here); what matters is that it reports.
    let doctor_reported =
        words.first().is_some_and(|w| w == "doctor") && run.status.code() == Some(1) && !run.stdout.is_empty();
    if run.status.success() || doctor_reported {
        Ok(())
    } else {
        let said = String::from_utf8_lossy(&run.stderr);
        let tail: Vec<&str> = said.lines().rev().take(4).collect();
        Err(format!(
            "{}: `interop-lab {}` failed ({}): {}",
            command.place,
            words.join(" "),
            run.status,
            tail.join(" / ")
        ))
    }
}

#[test]
fn the_pages_name_command_lines_to_check() {
    let all = all_commands();
    let concrete = all.iter().filter(|c| !c.is_synopsis()).count();
    eprintln!("{} command lines in the pages: {concrete} concrete, {} synopses", all.len(), all.len() - concrete);
    assert!(concrete >= 10 && all.len() - concrete >= 5, "the page parser finds the pages' commands: {all:#?}");
}

#[test]
fn every_synopsis_line_names_flags_and_values_the_cli_takes() {
    let wrong: Vec<String> =
        all_commands().iter().filter(|c| c.is_synopsis()).flat_map(synopsis_disagreements).collect();
    assert!(wrong.is_empty(), "pages disagree with the CLI:\n{}", wrong.join("\n"));
}

#[test]
fn every_concrete_command_line_runs_as_written() {
    let on_cuda = std::env::var("INTEROP_LAB_DOC_COMMANDS").is_ok_and(|v| v == "cuda");
    let display = std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some();
    let mut failed = Vec::new();
    let mut ran = 0;
    for command in all_commands().iter().filter(|c| !c.is_synopsis()) {
        let why_not_here = match (command.needs, on_cuda) {
            (Needs::Nothing, false) | (Needs::Cuda, true) => None,
            (Needs::Nothing, true) => Some("needs no CUDA: run by the checks without a GPU"),
            (Needs::Cuda, false) => Some("needs CUDA: run by scripts/gpu-check on the GPU machine"),
            (Needs::TwoDevices, _) => Some("needs two CUDA devices, which no machine of the checks has"),
        };
        if let Some(why) = why_not_here {
            eprintln!("skipped: {}: interop-lab {} ({why})", command.place, command.words.join(" "));
            continue;
        }
        let headless_windows = on_cuda && !display;
        if opens_a_window(&command.words)
            && !headless_windows
            && !common::available(display, "a display for the pages' window commands", "INTEROP_LAB_REQUIRE_DISPLAY")
        {
            continue;
        }
        let dir = common::temp_dir(&format!("doc-command-{ran}"));
        if let Err(why) = run(command, &dir, headless_windows) {
            failed.push(why);
        }
        std::fs::remove_dir_all(&dir).ok();
        ran += 1;
    }
    eprintln!("{ran} command lines ran");
    assert!(failed.is_empty(), "command lines in the pages that do not run as written:\n{}", failed.join("\n"));
}
