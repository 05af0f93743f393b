#version 450
// The GL shader's twin (shaders/wave.frag): the same colour ramp and light.
layout(location = 0) in float height01;
layout(location = 1) in vec3 world;

layout(push_constant) uniform Parameters {
    mat4 view_projection;
    float point_size;
    float amplitude;
    int shade_mesh;
} parameters;

layout(location = 0) out vec4 colour;

void main() {
    vec3 low = vec3(0.10, 0.22, 0.55);
    vec3 mid = vec3(0.10, 0.70, 0.65);
    vec3 high = vec3(1.00, 0.82, 0.35);
    vec3 base = height01 < 0.5 ? mix(low, mid, height01 * 2.0) : mix(mid, high, height01 * 2.0 - 1.0);
    if (parameters.shade_mesh == 1) {
        vec3 normal = normalize(cross(dFdx(world), dFdy(world)));
        float light = 0.35 + 0.65 * abs(dot(normal, normalize(vec3(0.4, 1.0, 0.3))));
        base *= light;
    }
    colour = vec4(base, 1.0);
}
