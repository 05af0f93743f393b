//! The launch-configuration editor: block and grid edited live, validated against the device and
//! the kernel before they are used; an invalid value shows why and the last good one stays.

use crate::cuda::launch::{DeviceLimits, LaunchConfig};
use crate::cuda::module::FunctionAttributes;

/// Editor state for a 2-D launch.
#[derive(Debug, Clone)]
pub struct LaunchEditor {
    block: [u32; 2],
    grid: [u32; 2],
    auto_grid: bool,
    shared_memory_bytes: u32,
    last_good: LaunchConfig,
    error: Option<String>,
}

impl LaunchEditor {
    /// Starts from a configuration already known to be good.
    pub fn new(config: LaunchConfig, auto_grid: bool) -> Self {
        Self {
            block: [config.block[0], config.block[1]],
            grid: [config.grid[0], config.grid[1]],
            auto_grid,
            shared_memory_bytes: config.shared_memory_bytes,
            last_good: config,
            error: None,
        }
    }

    /// Whether the grid follows the problem size.
    pub fn auto_grid(&self) -> bool {
        self.auto_grid
    }

    /// Takes a configuration set elsewhere (e.g. after a resize) as the new good one.
    pub fn set(&mut self, config: LaunchConfig) {
        *self = Self::new(config, self.auto_grid);
    }

    /// The last validation error, if the edited values are not in use.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Applies edited values: `Some(config)` when they changed and are valid, `None` otherwise
    /// (an invalid edit keeps the last good configuration and records why).
    pub fn apply(
        &mut self,
        limits: &DeviceLimits,
        attributes: &FunctionAttributes,
        problem: [u32; 2],
    ) -> Option<LaunchConfig> {
        if self.auto_grid {
            self.grid =
                [problem[0].div_ceil(self.block[0].max(1)).max(1), problem[1].div_ceil(self.block[1].max(1)).max(1)];
        }
        let candidate = LaunchConfig {
            grid: [self.grid[0], self.grid[1], 1],
            block: [self.block[0], self.block[1], 1],
            shared_memory_bytes: self.shared_memory_bytes,
        };
        if candidate == self.last_good {
            self.error = None;
            return None;
        }
        match candidate.validate(limits, attributes) {
            Ok(()) => {
                self.last_good = candidate;
                self.error = None;
                Some(candidate)
            }
            Err(error) => {
                self.error = Some(format!(
                    "{error}; still running grid {:?} × block {:?}",
                    self.last_good.grid, self.last_good.block
                ));
                None
            }
        }
    }

    /// Draws the editor and applies changes. `problem` is the number of items in x and y that an
    /// automatic grid covers.
    pub fn show(
        &mut self,
        ui: &mut egui::Ui,
        limits: &DeviceLimits,
        attributes: &FunctionAttributes,
        problem: [u32; 2],
    ) -> Option<LaunchConfig> {
        ui.label(egui::RichText::new("Launch configuration").strong());
        ui.horizontal(|ui| {
            ui.label("block");
            ui.add(egui::DragValue::new(&mut self.block[0]).range(0..=4096));
            ui.label("×");
            ui.add(egui::DragValue::new(&mut self.block[1]).range(0..=4096));
        });
        ui.checkbox(&mut self.auto_grid, "grid covers the problem");
        ui.add_enabled_ui(!self.auto_grid, |ui| {
            ui.horizontal(|ui| {
                ui.label("grid");
                ui.add(egui::DragValue::new(&mut self.grid[0]).range(0..=1_000_000));
                ui.label("×");
                ui.add(egui::DragValue::new(&mut self.grid[1]).range(0..=1_000_000));
            });
        });
        let changed = self.apply(limits, attributes, problem);
        let good = self.last_good;
        ui.label(format!(
            "running: grid {}×{} × block {}×{} = {} threads",
            good.grid[0],
            good.grid[1],
            good.block[0],
            good.block[1],
            good.block_threads() * u64::from(good.grid[0]) * u64::from(good.grid[1]),
        ));
        ui.label(format!(
            "kernel: {} registers/thread, {} B static shared, ≤ {} threads/block",
            attributes.registers, attributes.static_shared_bytes, attributes.max_threads_per_block
        ));
        if let Some(error) = &self.error {
            ui.colored_label(egui::Color32::LIGHT_RED, error);
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_edit_keeps_the_last_good_configuration() {
        let limits = DeviceLimits {
            max_threads_per_block: 1024,
            max_block_dim: [1024, 1024, 64],
            max_grid_dim: [2_147_483_647, 65535, 65535],
            shared_memory_per_block_optin: 232_448,
        };
        let attributes = FunctionAttributes { max_threads_per_block: 1024, registers: 16, ..Default::default() };
        let start = LaunchConfig::for_grid_2d(256, 256, [16, 16]);
        let mut editor = LaunchEditor::new(start, true);
        assert_eq!(editor.apply(&limits, &attributes, [256, 256]), None, "nothing changed");

        editor.block = [64, 32]; // 2048 threads
        assert_eq!(editor.apply(&limits, &attributes, [256, 256]), None);
        let error = editor.error().expect("the edit is rejected").to_owned();
        assert!(error.contains("1024 threads per block") && error.contains("[16, 16, 1]"), "{error}");

        editor.block = [32, 8];
        let applied = editor.apply(&limits, &attributes, [256, 256]).expect("valid edit applies");
        assert_eq!(applied.block, [32, 8, 1]);
        assert_eq!(applied.grid, [8, 32, 1], "the automatic grid follows the block");
        assert_eq!(editor.error(), None);
    }
}
