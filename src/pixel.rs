//! Pixel formats of the images the app shows, as every layer names them (the graphics APIs map
//! them to their own enums).

/// Pixel formats of the images the app shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum PixelFormat {
    /// 8 bits per channel, unsigned normalised.
    Rgba8,
    /// 32-bit float per channel.
    Rgba32f,
}

impl PixelFormat {
    /// Bytes per pixel.
    pub fn bytes_per_pixel(self) -> usize {
        match self {
            PixelFormat::Rgba8 => 4,
            PixelFormat::Rgba32f => 16,
        }
    }

    /// "rgba8" or "rgba32f".
    pub fn name(self) -> &'static str {
        match self {
            PixelFormat::Rgba8 => "rgba8",
            PixelFormat::Rgba32f => "rgba32f",
        }
    }
}
