#version 330 core
in vec3 colour;
in float intensity;
out vec4 fragment;

void main() {
    // A soft round sprite: Gaussian falloff inside the unit disc, nothing outside it.
    vec2 p = gl_PointCoord * 2.0 - 1.0;
    float r2 = dot(p, p);
    if (r2 > 1.0) {
        discard;
    }
    fragment = vec4(colour * (exp(-4.0 * r2) * intensity), 1.0);
}
