#version 450
// One body on Vulkan: the GL shader's twin (shaders/nbody.vert), its uniforms as push constants
// and GL's depth range [-w, w] mapped to Vulkan's [0, w].
layout(location = 0) in vec4 body;       // x, y, z, mass
layout(location = 1) in vec4 velocity;   // vx, vy, vz, unused

layout(push_constant) uniform Parameters {
    mat4 view_projection;
    float pixels_per_unit;   // viewport height / (2 tan(fov / 2)): pixels per unit at distance 1
    float point_radius;      // sprite radius in world units
    float speed_scale;       // the speed drawn with the hottest colour
    float brightness;
} parameters;

layout(location = 0) out vec3 colour;
layout(location = 1) out float intensity;

// Slow bodies deep blue, then violet, orange, and pale yellow for the fastest.
vec3 colour_map(float t) {
    vec3 a = vec3(0.10, 0.15, 0.55);
    vec3 b = vec3(0.55, 0.20, 0.70);
    vec3 c = vec3(1.00, 0.50, 0.15);
    vec3 d = vec3(1.00, 0.95, 0.70);
    if (t < 1.0 / 3.0) {
        return mix(a, b, t * 3.0);
    }
    if (t < 2.0 / 3.0) {
        return mix(b, c, t * 3.0 - 1.0);
    }
    return mix(c, d, t * 3.0 - 2.0);
}

void main() {
    vec4 clip = parameters.view_projection * vec4(body.xyz, 1.0);
    float size = 2.0 * parameters.point_radius * parameters.pixels_per_unit / max(clip.w, 1e-4);
    gl_PointSize = clamp(size, 1.5, 48.0);
    // A sprite drawn larger than its true size keeps the light of its true size.
    float area = (size * size) / (gl_PointSize * gl_PointSize);
    intensity = parameters.brightness * min(area, 1.0);
    colour = colour_map(clamp(length(velocity.xyz) / max(parameters.speed_scale, 1e-9), 0.0, 1.0));
    clip.z = 0.5 * (clip.z + clip.w);
    gl_Position = clip;
}
