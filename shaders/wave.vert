#version 330 core
// One vertex of the wave grid, as the kernel (or its CPU twin) wrote it: (u, height, v, 1).
layout(location = 0) in vec4 position;

uniform mat4 view_projection;
uniform float point_size;
uniform float amplitude;

out float height01;   // height mapped to [0, 1] for the colour ramp
out vec3 world;

void main() {
    world = position.xyz;
    height01 = clamp(0.5 + 0.5 * position.y / max(amplitude, 1e-6), 0.0, 1.0);
    gl_Position = view_projection * vec4(position.xyz, 1.0);
    gl_PointSize = point_size;
}
