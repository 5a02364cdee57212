//! The GPU's memory as Cake reads it, against `vulkaninfo`'s report of the
//! same adapter (`make test` installs both lavapipe and vulkan-tools).

use cake_gpu::{Gpu, GpuOptions};
use std::process::Command;

/// The sizes of the device-local heaps `vulkaninfo` prints for the device
/// named `name`.
fn vulkaninfo_local_heaps(name: &str) -> Vec<u64> {
    let output = Command::new("vulkaninfo").output().expect("vulkaninfo runs (package vulkan-tools)");
    let text = String::from_utf8_lossy(&output.stdout);
    // One section per device: "GPU0:", "GPU1:", …
    let section = text
        .split("\nGPU")
        .skip(1)
        .find(|s| s.contains(&format!("deviceName        = {name}")))
        .unwrap_or_else(|| panic!("vulkaninfo lists {name}"));
    let section = section.split("VkPhysicalDeviceMemoryProperties:").nth(1).expect("its memory properties");
    let heaps = section.split("memoryTypes:").next().unwrap_or_default();
    heaps
        .split("memoryHeaps[")
        .skip(1)
        .filter(|heap| heap.contains("MEMORY_HEAP_DEVICE_LOCAL_BIT"))
        .map(|heap| {
            let size = heap.split("size").nth(1).expect("a heap size");
            let digits: String = size.trim_start_matches([' ', '=']).chars().take_while(char::is_ascii_digit).collect();
            digits.parse().expect("the size in bytes")
        })
        .collect()
}

#[test]
fn the_memory_read_matches_vulkaninfo() {
    let gpu = Gpu::open(GpuOptions { allow_software: true, ..Default::default() })
        .unwrap_or_else(|why| panic!("the GPU tests need a Vulkan driver (lavapipe will do): {why}"));
    let memory = gpu.memory().expect("a Vulkan device reports its heaps");
    let heaps = vulkaninfo_local_heaps(&gpu.info().name);
    assert!(!heaps.is_empty(), "vulkaninfo shows a device-local heap");
    assert_eq!(memory.total_bytes, heaps.iter().sum::<u64>());
    assert!(memory.free_bytes <= memory.total_bytes, "{memory:?}");
    if !memory.budget_reported {
        assert_eq!(memory.free_bytes, memory.total_bytes, "without a budget, free is the total");
    }
}
