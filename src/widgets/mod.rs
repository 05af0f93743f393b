//! egui widgets that the demos' panels are built from. They live below the demos (and below the
//! app's side panel in `ui`, which shows the demos), so a demo uses them without importing `ui`.

pub mod launch;
