#version 330 core
// One body: position and mass from the positions buffer, velocity from the velocities buffer;
// both written by the kernels (or the CPU twin) this frame.
layout(location = 0) in vec4 body;       // x, y, z, mass
layout(location = 1) in vec4 velocity;   // vx, vy, vz, unused

uniform mat4 view_projection;
uniform float pixels_per_unit;   // viewport height / (2 tan(fov / 2)): pixels per unit at distance 1
uniform float point_radius;      // sprite radius in world units
uniform float speed_scale;       // the speed drawn with the hottest colour
uniform float brightness;

out vec3 colour;
out float intensity;

// Slow bodies deep blue, then violet, orange, and pale yellow for the fastest.
vec3 colour_map(float t) {
    vec3 a = vec3(0.10, 0.15, 0.55);
    vec3 b = vec3(0.55, 0.20, 0.70);
    vec3 c = vec3(1.00, 0.50, 0.15);
    vec3 d = vec3(1.00, 0.95, 0.70);
    if (t < 1.0 / 3.0) return mix(a, b, t * 3.0);
    if (t < 2.0 / 3.0) return mix(b, c, t * 3.0 - 1.0);
    return mix(c, d, t * 3.0 - 2.0);
}

void main() {
    vec4 clip = view_projection * vec4(body.xyz, 1.0);
    gl_Position = clip;
    float size = 2.0 * point_radius * pixels_per_unit / max(clip.w, 1e-4);
    gl_PointSize = clamp(size, 1.5, 48.0);
    // A sprite drawn larger than its true size keeps the light of its true size.
    float area = (size * size) / (gl_PointSize * gl_PointSize);
    intensity = brightness * min(area, 1.0);
    colour = colour_map(clamp(length(velocity.xyz) / max(speed_scale, 1e-9), 0.0, 1.0));
}
