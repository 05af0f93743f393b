#version 450
// The GL shader's twin (shaders/nbody.frag): a soft round sprite.
layout(location = 0) in vec3 colour;
layout(location = 1) in float intensity;

layout(location = 0) out vec4 fragment;

void main() {
    // Gaussian falloff inside the unit disc, nothing outside it.
    vec2 p = gl_PointCoord * 2.0 - 1.0;
    float r2 = dot(p, p);
    if (r2 > 1.0) {
        discard;
    }
    fragment = vec4(colour * (exp(-4.0 * r2) * intensity), 1.0);
}
