//! The window's keys and mouse: Esc closes, space pauses, `s` steps, `v` switches vsync; drags and
//! the wheel move the demo's view; a file dropped on the window goes to the demo.

use winit::event::{ElementState, MouseButton, MouseScrollDelta, WindowEvent};
use winit::keyboard::{Key, ModifiersState, NamedKey};

use crate::demo_kit::Drag;
use crate::session::Session;
use crate::ui::PanelAction;

/// What the mouse is doing.
#[derive(Default)]
pub(super) struct Input {
    drag: Option<Drag>,
    cursor: Option<(f64, f64)>,
    modifiers: ModifiersState,
}

impl Input {
    /// Handles a window event egui did (`consumed`) or did not take; returns true when the window
    /// should close.
    pub(super) fn event(&mut self, event: &WindowEvent, consumed: bool, session: &mut Session) -> bool {
        match event {
            WindowEvent::ModifiersChanged(modifiers) => self.modifiers = modifiers.state(),
            WindowEvent::KeyboardInput { event, .. } if !consumed && event.state == ElementState::Pressed => {
                return self.key(&event.logical_key, session);
            }
            WindowEvent::MouseInput { state, button, .. } if !consumed || *state == ElementState::Released => {
                self.drag = match (state, button) {
                    (ElementState::Released, _) => None,
                    (_, MouseButton::Left) if self.modifiers.shift_key() => Some(Drag::Secondary),
                    (_, MouseButton::Left) => Some(Drag::Primary),
                    (_, MouseButton::Right | MouseButton::Middle) => Some(Drag::Secondary),
                    _ => self.drag,
                };
            }
            WindowEvent::CursorMoved { position, .. } => {
                let previous = self.cursor.replace((position.x, position.y));
                let height = session.renderer().size()[1] as f32;
                if let (Some((x, y)), Some(drag)) = (previous, self.drag)
                    && let Some(view) = session.demo().ok().and_then(|demo| demo.view_controls())
                {
                    view.drag(drag, (position.x - x) as f32, (position.y - y) as f32, height);
                }
            }
            WindowEvent::MouseWheel { delta, .. } if !consumed => {
                let steps = match delta {
                    MouseScrollDelta::LineDelta(_, y) => *y,
                    MouseScrollDelta::PixelDelta(p) => (p.y / 40.0) as f32,
                };
                if let Some(view) = session.demo().ok().and_then(|demo| demo.view_controls()) {
                    view.zoom(steps);
                }
            }
            WindowEvent::DroppedFile(path) => session.open_file(path),
            _ => {}
        }
        false
    }

    /// A key: Esc closes (returns true); space pauses or resumes; `s` steps; `v` switches vsync.
    fn key(&mut self, key: &Key, session: &mut Session) -> bool {
        let action = match key {
            Key::Named(NamedKey::Escape) => return true,
            Key::Named(NamedKey::Space) => PanelAction::Pause(!session.paused()),
            Key::Character(c) if c.as_str() == "s" => PanelAction::Step,
            Key::Character(c) if c.as_str() == "v" => match session.renderer().vsync() {
                Some(on) => PanelAction::SetVsync(!on),
                None => return false,
            },
            _ => return false,
        };
        session.act(action);
        false
    }
}
