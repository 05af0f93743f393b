#version 450
// The GL shader's twin (shaders/tree_boxes.frag).
layout(location = 0) in vec3 colour;

layout(location = 0) out vec4 fragment;

void main() {
    fragment = vec4(colour, 1.0);
}
