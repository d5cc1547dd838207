//! An image checked before a model sees it, inside the decode worker: its dimensions come from
//! the header alone (`imagesize`, no pixel is decoded), and an image over `max_image_pixels`
//! is refused with its size named. One under the cap goes on to the model byte for byte.

use crate::media::MediaError;

/// The image's width and height, or why it is refused.
pub fn check_image(bytes: &[u8], max_pixels: u64) -> Result<(u64, u64), MediaError> {
    let size = imagesize::blob_size(bytes)
        .map_err(|e| MediaError::Corrupt(format!("it is malformed (not a readable image: {e})")))?;
    let (width, height) = (size.width as u64, size.height as u64);
    if width.saturating_mul(height) > max_pixels {
        return Err(MediaError::ImageTooLarge {
            width,
            height,
            max: max_pixels,
        });
    }
    Ok((width, height))
}
