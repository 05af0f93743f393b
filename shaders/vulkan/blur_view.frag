#version 450
// Before/after viewer, the GL shader's twin (shaders/blur_view.frag): the original left of the
// split line, the blurred image right of it. Vulkan's gl_FragCoord counts rows from the top, so
// the target's height turns it into GL's bottom-up pixel.
layout(set = 0, binding = 0) uniform texture2D original_image;
layout(set = 0, binding = 1) uniform sampler original_sampler;
layout(set = 0, binding = 2) uniform texture2D blurred_image;
layout(set = 0, binding = 3) uniform sampler blurred_sampler;

layout(push_constant) uniform Parameters {
    vec2 viewport_origin;   // pixels, from the lower left
    vec2 viewport_size;     // pixels
    vec2 image_size;        // pixels
    vec2 pan;               // image pixels from the image centre to the view centre
    float zoom;             // screen pixels per image pixel
    float split;            // split line, as a fraction of the viewport width
    float target_height;    // pixels
} parameters;

layout(location = 0) out vec4 colour;

void main() {
    vec2 frag = vec2(gl_FragCoord.x, parameters.target_height - gl_FragCoord.y) - parameters.viewport_origin;
    float split_x = parameters.split * parameters.viewport_size.x;
    if (abs(frag.x - split_x) < 1.0) {
        colour = vec4(1.0, 1.0, 1.0, 1.0);
        return;
    }
    // Screen y goes up, image rows go down.
    vec2 centred = vec2(frag.x - 0.5 * parameters.viewport_size.x, 0.5 * parameters.viewport_size.y - frag.y);
    vec2 pixel = centred / parameters.zoom + 0.5 * parameters.image_size + parameters.pan;
    if (any(lessThan(pixel, vec2(0.0))) || any(greaterThanEqual(pixel, parameters.image_size))) {
        // Outside the image: a dim checkerboard.
        float check = mod(floor(frag.x / 16.0) + floor(frag.y / 16.0), 2.0);
        colour = vec4(vec3(0.08 + 0.03 * check), 1.0);
        return;
    }
    vec2 uv = pixel / parameters.image_size;
    vec3 rgb = frag.x < split_x
        ? texture(sampler2D(original_image, original_sampler), uv).rgb
        : texture(sampler2D(blurred_image, blurred_sampler), uv).rgb;
    colour = vec4(rgb, 1.0);
}
