//! An orbit camera: drag to orbit, scroll to zoom, right-drag (or shift-drag) to pan.

use glam::{Mat4, Vec3};

/// A camera looking at `target` from `distance` away, at angles `yaw` and `pitch`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OrbitCamera {
    /// The point looked at.
    pub target: Vec3,
    /// Rotation about the vertical axis, radians.
    pub yaw: f32,
    /// Elevation, radians (kept inside ±89°).
    pub pitch: f32,
    /// Distance from the target.
    pub distance: f32,
    /// Vertical field of view, radians.
    pub fov_y: f32,
}

impl OrbitCamera {
    /// A camera at `distance` from the origin, looking slightly down.
    pub fn new(distance: f32) -> Self {
        Self { target: Vec3::ZERO, yaw: 0.6, pitch: 0.5, distance, fov_y: 45f32.to_radians() }
    }

    /// The eye position.
    pub fn eye(&self) -> Vec3 {
        let (sin_yaw, cos_yaw) = self.yaw.sin_cos();
        let (sin_pitch, cos_pitch) = self.pitch.sin_cos();
        self.target + self.distance * Vec3::new(cos_pitch * sin_yaw, sin_pitch, cos_pitch * cos_yaw)
    }

    /// View matrix (right-handed, y up).
    pub fn view(&self) -> Mat4 {
        glam::camera::rh::view::look_at_mat4(self.eye(), self.target, Vec3::Y)
    }

    /// Projection × view for a viewport of `aspect` = width / height, with GL's depth range.
    pub fn view_projection(&self, aspect: f32) -> Mat4 {
        let near = (self.distance * 0.001).max(1e-4);
        let far = self.distance * 100.0 + 100.0;
        let projection = glam::camera::rh::proj::opengl::perspective(self.fov_y, aspect.max(1e-3), near, far);
        projection * self.view()
    }

    /// Orbits by a mouse drag of `dx`, `dy` pixels.
    pub fn orbit(&mut self, dx: f32, dy: f32) {
        self.yaw -= dx * 0.005;
        self.pitch = (self.pitch + dy * 0.005).clamp(-1.55, 1.55);
    }

    /// Zooms by `steps` scroll steps (positive: closer).
    pub fn zoom(&mut self, steps: f32) {
        self.distance = (self.distance * 0.9f32.powf(steps)).clamp(1e-3, 1e6);
    }

    /// Pans by a drag of `dx`, `dy` pixels in a viewport `height` pixels high.
    pub fn pan(&mut self, dx: f32, dy: f32, height: f32) {
        let view = self.view();
        let right = Vec3::new(view.x_axis.x, view.y_axis.x, view.z_axis.x);
        let up = Vec3::new(view.x_axis.y, view.y_axis.y, view.z_axis.y);
        let scale = 2.0 * self.distance * (self.fov_y * 0.5).tan() / height.max(1.0);
        self.target += (-dx * right + dy * up) * scale;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_projects_to_the_viewport_centre() {
        let mut camera = OrbitCamera::new(3.0);
        camera.orbit(120.0, -40.0);
        camera.pan(30.0, 10.0, 600.0);
        let clip = camera.view_projection(1.6) * camera.target.extend(1.0);
        let ndc = clip.truncate() / clip.w;
        assert!(ndc.x.abs() < 1e-5 && ndc.y.abs() < 1e-5, "{ndc:?}");
        assert!(ndc.z > -1.0 && ndc.z < 1.0, "inside the depth range: {ndc:?}");
        let before = camera.distance;
        camera.zoom(1.0);
        assert!(camera.distance < before);
        assert!((camera.eye() - camera.target).length() - camera.distance < 1e-4);
    }
}
