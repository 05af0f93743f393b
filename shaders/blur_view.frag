#version 330 core
// Before/after viewer: the original left of the split line, the blurred image right of it.
uniform sampler2D original;
uniform sampler2D blurred;
uniform vec2 viewport_origin;   // pixels
uniform vec2 viewport_size;     // pixels
uniform vec2 image_size;        // pixels
uniform vec2 pan;               // image pixels from the image centre to the view centre
uniform float zoom;             // screen pixels per image pixel
uniform float split;            // split line, as a fraction of the viewport width

out vec4 colour;

void main() {
    vec2 frag = gl_FragCoord.xy - viewport_origin;
    float split_x = split * viewport_size.x;
    if (abs(frag.x - split_x) < 1.0) {
        colour = vec4(1.0, 1.0, 1.0, 1.0);
        return;
    }
    // Screen y goes up, image rows go down.
    vec2 centred = vec2(frag.x - 0.5 * viewport_size.x, 0.5 * viewport_size.y - frag.y);
    vec2 pixel = centred / zoom + 0.5 * image_size + pan;
    if (any(lessThan(pixel, vec2(0.0))) || any(greaterThanEqual(pixel, image_size))) {
        // Outside the image: a dim checkerboard.
        float check = mod(floor(frag.x / 16.0) + floor(frag.y / 16.0), 2.0);
        colour = vec4(vec3(0.08 + 0.03 * check), 1.0);
        return;
    }
    vec2 uv = pixel / image_size;
    vec3 rgb = frag.x < split_x ? texture(original, uv).rgb : texture(blurred, uv).rgb;
    colour = vec4(rgb, 1.0);
}
