#version 450
// A box corner on Vulkan: the GL shader's twin (shaders/tree_boxes.vert), its uniform a push
// constant and GL's depth range [-w, w] mapped to Vulkan's [0, w].
layout(location = 0) in vec4 corner;

layout(push_constant) uniform Parameters {
    mat4 view_projection;
} parameters;

layout(location = 0) out vec3 colour;

void main() {
    if (corner.w < 0.5) {
        gl_Position = vec4(2.0, 2.0, 2.0, 1.0);
        colour = vec3(0.0);
        return;
    }
    vec4 clip = parameters.view_projection * vec4(corner.xyz, 1.0);
    float level = corner.w - 1.0;
    float fade = 1.0 / (1.0 + 0.35 * level);
    colour = mix(vec3(0.25, 0.85, 1.0), vec3(0.35, 1.0, 0.45), clamp(level / 10.0, 0.0, 1.0)) * (0.55 * fade);
    clip.z = 0.5 * (clip.z + clip.w);
    gl_Position = clip;
}
