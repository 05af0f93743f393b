//! How `--devices` is read and how the bodies are cut between the devices: whole j slices,
//! contiguous per device, as many as fill each device.

use super::super::kernels::Variant;
use super::super::sim::auto_slices;
use crate::error::{Error, Result};

/// Most entries in `--devices`.
pub const MAX_DEVICES: usize = 16;

/// Parses `--devices`: comma-separated CUDA device ordinals, e.g. `0,1` or `0,0`.
pub fn parse_devices(text: &str) -> std::result::Result<Vec<i32>, String> {
    let entries: Vec<&str> = text.split(',').map(str::trim).collect();
    if entries.iter().all(|entry| entry.is_empty()) {
        return Err("--devices needs at least one CUDA device ordinal, e.g. --devices 0,1 (or 0,0 for two contexts \
                    on one GPU)"
            .to_owned());
    }
    let mut devices = Vec::with_capacity(entries.len());
    for entry in entries {
        match entry.parse::<i32>() {
            Ok(ordinal) if ordinal >= 0 => devices.push(ordinal),
            _ => {
                return Err(format!(
                    "{entry:?} is not a CUDA device ordinal: give numbers 0, 1, … separated by commas, e.g. \
                     --devices 0,1 (`interop-lab doctor` lists the devices)"
                ));
            }
        }
    }
    if devices.len() > MAX_DEVICES {
        return Err(format!("--devices takes at most {MAX_DEVICES} entries, not {}", devices.len()));
    }
    Ok(devices)
}

/// Checks `devices` against the `count` devices the driver reports.
pub fn check_ordinals(devices: &[i32], count: i32) -> Result<()> {
    match devices.iter().find(|&&ordinal| ordinal >= count) {
        Some(ordinal) => Err(Error::InvalidInput(format!(
            "--devices names device {ordinal}, but this machine has {count} CUDA device(s) ({}): use ordinals below \
             {count}, or repeat one (--devices 0,0) for several contexts on one GPU",
            if count > 0 { format!("0..={}", count - 1) } else { "none".to_owned() }
        ))),
        None => Ok(()),
    }
}

/// One device's share of the bodies: a run of whole j slices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition {
    /// First body it integrates.
    pub first_body: u32,
    /// Bodies it integrates.
    pub bodies: u32,
    /// First j slice (its bodies are the bodies of its slices).
    pub first_slice: u32,
    /// j slices it owns.
    pub slice_count: u32,
}

/// Total j slices for `devices` devices: the requested count, or on each device as many as fill
/// it for its share of the bodies (see [`auto_slices`]), times the device count.
pub fn total_slices(multiprocessors: i32, variant: &Variant, n: u32, devices: usize, requested: Option<u32>) -> u32 {
    requested.unwrap_or_else(|| {
        let share = n.div_ceil(devices.max(1) as u32);
        devices.max(1) as u32 * auto_slices(multiprocessors, variant.bodies_per_block(), variant.tile_size, share)
    })
}

/// Splits `n` bodies, in j slices of `slice_length`, among `devices` devices as evenly as whole
/// slices allow. Fails when there are fewer slices than devices.
pub fn partition(n: u32, slice_length: u32, devices: usize) -> Result<Vec<Partition>> {
    let slice_length = slice_length.max(1);
    let slices = n.div_ceil(slice_length);
    let count = devices as u32;
    if devices == 0 || slices < count {
        return Err(Error::InvalidInput(format!(
            "{n} bodies make {slices} slice(s) of {slice_length}, too few to give each of {devices} device(s) one: \
             use at least {} bodies or fewer devices",
            u64::from(slice_length) * u64::from(count.max(1))
        )));
    }
    Ok((0..count)
        .map(|k| {
            let first_slice = (u64::from(k) * u64::from(slices) / u64::from(count)) as u32;
            let end_slice = (u64::from(k + 1) * u64::from(slices) / u64::from(count)) as u32;
            let first_body = first_slice * slice_length;
            let end_body = (u64::from(end_slice) * u64::from(slice_length)).min(u64::from(n)) as u32;
            Partition { first_body, bodies: end_body - first_body, first_slice, slice_count: end_slice - first_slice }
        })
        .collect())
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_parse_and_bad_lists_are_named() {
        assert_eq!(parse_devices("0"), Ok(vec![0]));
        assert_eq!(parse_devices("0,1"), Ok(vec![0, 1]));
        assert_eq!(parse_devices(" 0, 0 ,1"), Ok(vec![0, 0, 1]));
        let error = |text: &str| parse_devices(text).expect_err("must be rejected");
        assert!(error("").contains("at least one CUDA device ordinal"));
        assert!(error(",").contains("at least one CUDA device ordinal"));
        assert!(error("0,x").contains("\"x\" is not a CUDA device ordinal"));
        assert!(error("0,,1").contains("\"\" is not a CUDA device ordinal"));
        assert!(error("-1").contains("\"-1\" is not a CUDA device ordinal"));
        assert!(error("1.5").contains("is not a CUDA device ordinal"));
        assert!(error(&vec!["0"; MAX_DEVICES + 1].join(",")).contains("at most"));
    }

    #[test]
    fn ordinals_beyond_the_device_count_name_the_fix() {
        assert!(check_ordinals(&[0, 0, 1], 2).is_ok());
        let message = check_ordinals(&[0, 2], 2).expect_err("device 2 of 2").to_string();
        assert!(message.contains("device 2") && message.contains("0..=1") && message.contains("--devices 0,0"));
        let message = check_ordinals(&[0], 0).expect_err("no devices").to_string();
        assert!(message.contains("none"), "{message}");
    }

    #[test]
    fn partitions_cover_every_body_once_in_whole_slices() {
        for (n, slice_length, devices) in
            [(8192u32, 2048u32, 2usize), (1000, 128, 3), (65536, 256, 8), (262_144, 4096, 2), (300, 256, 2), (7, 1, 7)]
        {
            let parts = partition(n, slice_length, devices).expect("partition");
            assert_eq!(parts.len(), devices);
            let mut next_body = 0;
            let mut next_slice = 0;
            for part in &parts {
                assert_eq!(part.first_body, next_body, "contiguous");
                assert_eq!(part.first_slice, next_slice, "contiguous slices");
                assert_eq!(part.first_body, part.first_slice * slice_length, "bodies are whole slices");
                assert!(part.bodies > 0 && part.slice_count > 0);
                next_body += part.bodies;
                next_slice += part.slice_count;
            }
            assert_eq!(next_body, n, "every body once");
            assert_eq!(next_slice, n.div_ceil(slice_length), "every slice once");
            let counts: Vec<u32> = parts.iter().map(|p| p.slice_count).collect();
            let (least, most) = (counts.iter().min().copied(), counts.iter().max().copied());
            assert!(most.zip(least).is_some_and(|(most, least)| most - least <= 1), "even: {counts:?}");
        }
        let error = partition(300, 256, 3).expect_err("2 slices for 3 devices").to_string();
        assert!(error.contains("at least 768 bodies"), "{error}");
        assert!(partition(10, 4, 0).is_err());
    }

    #[test]
    fn total_slices_fill_each_device_and_respect_a_request() {
        let variant = Variant::default();
        // 2 devices, 65536 bodies: each fills itself for 32768 bodies.
        let share = auto_slices(132, variant.bodies_per_block(), variant.tile_size, 32768);
        assert_eq!(total_slices(132, &variant, 65536, 2, None), 2 * share);
        assert_eq!(total_slices(132, &variant, 65536, 2, Some(6)), 6);
        assert_eq!(total_slices(132, &variant, 65536, 1, None), auto_slices(132, 512, 256, 65536));
    }
}
