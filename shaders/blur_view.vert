#version 330 core
// A triangle that covers the viewport; the fragment shader maps pixels to image coordinates.
void main() {
    vec2 corner = vec2(float((gl_VertexID << 1) & 2), float(gl_VertexID & 2));
    gl_Position = vec4(corner * 2.0 - 1.0, 0.0, 1.0);
}
