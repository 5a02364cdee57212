//! How much memory a GPU has and how much of it is free, as its driver
//! reports it. wgpu has no call for this, so it is read from the backend
//! underneath: Vulkan's device-local heaps and, where the driver offers
//! `VK_EXT_memory_budget`, the budget left to this process. Metal and DX12
//! are not read yet: callers then have no figure and must be told one.

use crate::device::Gpu;

/// A GPU's memory in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuMemory {
    /// All device-local memory.
    pub total_bytes: u64,
    /// What this process may still allocate: the driver's budget minus
    /// what is in use, or the total where the driver reports no budget.
    pub free_bytes: u64,
    /// Whether `free_bytes` came from the driver's budget (else it is the
    /// total: other programs' use is unknown).
    pub budget_reported: bool,
}

impl Gpu {
    /// The GPU's memory now, or `None` where its backend cannot tell.
    pub fn memory(&self) -> Option<GpuMemory> {
        #[cfg(any(windows, target_os = "linux", target_os = "android", target_os = "freebsd"))]
        if let Some(memory) = vulkan::memory(&self.device) {
            return Some(memory);
        }
        None
    }
}

#[cfg(any(windows, target_os = "linux", target_os = "android", target_os = "freebsd"))]
mod vulkan {
    use super::GpuMemory;
    use ash::vk;

    /// The device-local heaps of the Vulkan device behind `device`; `None`
    /// when `device` runs on another backend.
    pub(super) fn memory(device: &wgpu::Device) -> Option<GpuMemory> {
        // SAFETY: the raw handles are only used for read-only queries of
        // the physical device while `device` (which owns them) is alive.
        let hal = unsafe { device.as_hal::<wgpu::hal::api::Vulkan>() }?;
        let shared = hal.shared_instance();
        let instance = shared.raw_instance();
        let physical = hal.raw_physical_device();
        // The budget query needs Vulkan 1.1 and the extension.
        let budget_supported = shared.instance_api_version() >= vk::API_VERSION_1_1
            && unsafe { instance.enumerate_device_extension_properties(physical) }.is_ok_and(|extensions| {
                extensions.iter().any(|e| e.extension_name_as_c_str() == Ok(ash::ext::memory_budget::NAME))
            });
        let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
        let properties = if budget_supported {
            let mut properties = vk::PhysicalDeviceMemoryProperties2::default().push_next(&mut budget);
            // SAFETY: `physical` belongs to `instance`; the chain is valid.
            unsafe { instance.get_physical_device_memory_properties2(physical, &mut properties) };
            properties.memory_properties
        } else {
            // SAFETY: as above.
            unsafe { instance.get_physical_device_memory_properties(physical) }
        };
        let heaps = &properties.memory_heaps[..(properties.memory_heap_count as usize).min(vk::MAX_MEMORY_HEAPS)];
        let local = |(_, heap): &(usize, &vk::MemoryHeap)| heap.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL);
        let total_bytes = heaps.iter().enumerate().filter(local).map(|(_, heap)| heap.size).sum();
        let free_bytes = if budget_supported {
            heaps
                .iter()
                .enumerate()
                .filter(local)
                .map(|(i, _)| budget.heap_budget[i].saturating_sub(budget.heap_usage[i]))
                .sum()
        } else {
            total_bytes
        };
        Some(GpuMemory { total_bytes, free_bytes, budget_reported: budget_supported })
    }
}
