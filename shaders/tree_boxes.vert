#version 330 core
// One corner of a box of the n-body tree, written by the step (tree_boxes in
// kernels/nbody_tree.cu, or the CPU backend): x, y, z and the box's level + 1; 0 marks a slot no
// box took, put outside the clip volume so that its lines are not drawn.
layout(location = 0) in vec4 corner;

uniform mat4 view_projection;

out vec3 colour;

void main() {
    if (corner.w < 0.5) {
        gl_Position = vec4(2.0, 2.0, 2.0, 1.0);
        colour = vec3(0.0);
        return;
    }
    gl_Position = view_projection * vec4(corner.xyz, 1.0);
    // The root's box bright cyan; each level below a little dimmer and greener.
    float level = corner.w - 1.0;
    float fade = 1.0 / (1.0 + 0.35 * level);
    colour = mix(vec3(0.25, 0.85, 1.0), vec3(0.35, 1.0, 0.45), clamp(level / 10.0, 0.0, 1.0)) * (0.55 * fade);
}
