#version 450
// The wave grid on Vulkan: the GL shader's twin (shaders/wave.vert), with its uniforms as push
// constants and GL's depth range [-w, w] mapped to Vulkan's [0, w], so both draw the same pixels.
layout(location = 0) in vec4 position;

layout(push_constant) uniform Parameters {
    mat4 view_projection;
    float point_size;
    float amplitude;
    int shade_mesh;
} parameters;

layout(location = 0) out float height01;
layout(location = 1) out vec3 world;

void main() {
    world = position.xyz;
    height01 = clamp(0.5 + 0.5 * position.y / max(parameters.amplitude, 1e-6), 0.0, 1.0);
    vec4 clip = parameters.view_projection * vec4(position.xyz, 1.0);
    clip.z = 0.5 * (clip.z + clip.w);
    gl_Position = clip;
    gl_PointSize = parameters.point_size;
}
