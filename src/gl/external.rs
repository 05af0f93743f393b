//! `GL_EXT_memory_object` + `GL_EXT_memory_object_fd`: GL buffers whose storage is memory another
//! API (here CUDA) allocated and exported as a file descriptor; and `GL_EXT_semaphore` +
//! `GL_EXT_semaphore_fd`: semaphores another API made (here Vulkan), which GL's command stream
//! waits on and signals on the GPU. glow binds none of these, so their entry points are loaded from
//! the context's own loader.
#![allow(unsafe_code)]

use std::ffi::{CStr, c_void};

use glow::HasContext;

use super::{Buffer, check_error};
use crate::error::{Error, Result};

/// `GL_HANDLE_TYPE_OPAQUE_FD_EXT`.
const HANDLE_TYPE_OPAQUE_FD: u32 = 0x9586;

type CreateMemoryObjectsFn = unsafe extern "system" fn(count: i32, objects: *mut u32);
type DeleteMemoryObjectsFn = unsafe extern "system" fn(count: i32, objects: *const u32);
type ImportMemoryFdFn = unsafe extern "system" fn(memory: u32, size: u64, handle_type: u32, fd: i32);
type BufferStorageMemFn = unsafe extern "system" fn(target: u32, size: isize, memory: u32, offset: u64);

/// The four entry points, when the context offers both extensions.
#[derive(Clone, Copy)]
pub struct GlMemoryObjects {
    create: CreateMemoryObjectsFn,
    delete: DeleteMemoryObjectsFn,
    import_fd: ImportMemoryFdFn,
    buffer_storage: BufferStorageMemFn,
}

impl std::fmt::Debug for GlMemoryObjects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GlMemoryObjects")
    }
}

/// A GL context's function loader (`eglGetProcAddress`, `glXGetProcAddress`).
pub type Loader<'a> = &'a dyn Fn(&CStr) -> *const c_void;

impl GlMemoryObjects {
    /// Loads the entry points if the current context advertises `GL_EXT_memory_object` and
    /// `GL_EXT_memory_object_fd`; `None` otherwise.
    pub fn load(gl: &glow::Context, loader: Loader<'_>) -> Option<Self> {
        let extensions = gl.supported_extensions();
        if !extensions.contains("GL_EXT_memory_object") || !extensions.contains("GL_EXT_memory_object_fd") {
            return None;
        }
        let create = loader(c"glCreateMemoryObjectsEXT");
        let delete = loader(c"glDeleteMemoryObjectsEXT");
        let import_fd = loader(c"glImportMemoryFdEXT");
        let buffer_storage = loader(c"glBufferStorageMemEXT");
        if [create, delete, import_fd, buffer_storage].iter().any(|p| p.is_null()) {
            return None;
        }
        // SAFETY: each pointer is the context's entry point of exactly that name, whose C
        // signature (from the extension specifications) is the one given in the type aliases.
        unsafe {
            Some(Self {
                create: std::mem::transmute::<*const c_void, CreateMemoryObjectsFn>(create),
                delete: std::mem::transmute::<*const c_void, DeleteMemoryObjectsFn>(delete),
                import_fd: std::mem::transmute::<*const c_void, ImportMemoryFdFn>(import_fd),
                buffer_storage: std::mem::transmute::<*const c_void, BufferStorageMemFn>(buffer_storage),
            })
        }
    }

    /// Imports `fd` (GL takes ownership of it) as a memory object of `allocation_size` bytes and
    /// makes a buffer of `bytes` whose storage is that memory. Returns the memory object's name,
    /// which must be released with [`Self::delete`] after the buffer is deleted.
    pub fn import_buffer(
        &self,
        gl: &glow::Context,
        fd: i32,
        allocation_size: usize,
        bytes: usize,
    ) -> Result<(u32, Buffer)> {
        let mut memory = 0u32;
        // SAFETY: one name written to `memory`; the fd is a live exported handle whose ownership
        // passes to GL; the buffer's storage is the first `bytes` ≤ allocation_size of it.
        unsafe {
            (self.create)(1, &mut memory);
            (self.import_fd)(memory, allocation_size as u64, HANDLE_TYPE_OPAQUE_FD, fd);
            if let Err(error) = check_error(gl, "glImportMemoryFdEXT") {
                (self.delete)(1, &memory);
                return Err(error);
            }
            let raw = match gl.create_buffer() {
                Ok(raw) => raw,
                Err(error) => {
                    (self.delete)(1, &memory);
                    return Err(Error::Gl(error));
                }
            };
            gl.bind_buffer(glow::ARRAY_BUFFER, Some(raw));
            (self.buffer_storage)(glow::ARRAY_BUFFER, bytes as isize, memory, 0);
            gl.bind_buffer(glow::ARRAY_BUFFER, None);
            if let Err(error) = check_error(gl, "glBufferStorageMemEXT") {
                gl.delete_buffer(raw);
                (self.delete)(1, &memory);
                return Err(error);
            }
            Ok((memory, Buffer::from_raw(raw, bytes)))
        }
    }

    /// Deletes a memory object (after every buffer using it).
    pub fn delete(&self, memory: u32) {
        // SAFETY: a name created by `import_buffer`, deleted once.
        unsafe { (self.delete)(1, &memory) };
    }
}

type FinishFn = unsafe extern "system" fn();
type GenSemaphoresFn = unsafe extern "system" fn(count: i32, semaphores: *mut u32);
type DeleteSemaphoresFn = unsafe extern "system" fn(count: i32, semaphores: *const u32);
type ImportSemaphoreFdFn = unsafe extern "system" fn(semaphore: u32, handle_type: u32, fd: i32);
/// `glWaitSemaphoreEXT` and `glSignalSemaphoreEXT` have the same shape (the layouts are the
/// textures' source layouts for a wait, destination layouts for a signal).
type SemaphoreBarrierFn = unsafe extern "system" fn(
    semaphore: u32,
    buffer_count: u32,
    buffers: *const u32,
    texture_count: u32,
    textures: *const u32,
    layouts: *const u32,
);

/// The semaphore entry points, when the context offers `GL_EXT_semaphore` and `GL_EXT_semaphore_fd`.
#[derive(Clone, Copy)]
pub struct GlSemaphores {
    gen_semaphores: GenSemaphoresFn,
    delete: DeleteSemaphoresFn,
    import_fd: ImportSemaphoreFdFn,
    wait: SemaphoreBarrierFn,
    signal: SemaphoreBarrierFn,
    finish: FinishFn,
}

impl std::fmt::Debug for GlSemaphores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GlSemaphores")
    }
}

impl GlSemaphores {
    /// Loads the entry points if the current context advertises `GL_EXT_semaphore` and
    /// `GL_EXT_semaphore_fd`; `None` otherwise.
    pub fn load(gl: &glow::Context, loader: Loader<'_>) -> Option<Self> {
        let extensions = gl.supported_extensions();
        if !extensions.contains("GL_EXT_semaphore") || !extensions.contains("GL_EXT_semaphore_fd") {
            return None;
        }
        let pointers = [
            loader(c"glGenSemaphoresEXT"),
            loader(c"glDeleteSemaphoresEXT"),
            loader(c"glImportSemaphoreFdEXT"),
            loader(c"glWaitSemaphoreEXT"),
            loader(c"glSignalSemaphoreEXT"),
            loader(c"glFinish"),
        ];
        if pointers.iter().any(|p| p.is_null()) {
            return None;
        }
        let [gen_semaphores, delete, import_fd, wait, signal, finish] = pointers;
        // SAFETY: each pointer is the context's entry point of exactly that name, whose C
        // signature (from the extension specifications) is the one given in the type aliases.
        unsafe {
            Some(Self {
                gen_semaphores: std::mem::transmute::<*const c_void, GenSemaphoresFn>(gen_semaphores),
                delete: std::mem::transmute::<*const c_void, DeleteSemaphoresFn>(delete),
                import_fd: std::mem::transmute::<*const c_void, ImportSemaphoreFdFn>(import_fd),
                wait: std::mem::transmute::<*const c_void, SemaphoreBarrierFn>(wait),
                signal: std::mem::transmute::<*const c_void, SemaphoreBarrierFn>(signal),
                finish: std::mem::transmute::<*const c_void, FinishFn>(finish),
            })
        }
    }

    /// Imports `fd`, an opaque file descriptor of a semaphore, which GL takes over. Returns the
    /// semaphore's name, to be released with [`Self::delete`].
    pub fn import(&self, gl: &glow::Context, fd: std::os::fd::OwnedFd) -> Result<u32> {
        use std::os::fd::IntoRawFd;
        let mut semaphore = 0u32;
        let raw = fd.into_raw_fd();
        // SAFETY: one name written to `semaphore`; on success the descriptor belongs to GL.
        unsafe {
            (self.gen_semaphores)(1, &mut semaphore);
            (self.import_fd)(semaphore, HANDLE_TYPE_OPAQUE_FD, raw);
        }
        if let Err(error) = check_error(gl, "glImportSemaphoreFdEXT") {
            // SAFETY: the import failed, so the descriptor is still ours (closed once) and the
            // name is deleted once.
            unsafe {
                drop(<std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw));
                (self.delete)(1, &semaphore);
            }
            return Err(error);
        }
        Ok(semaphore)
    }

    /// Makes GL's later commands wait, on the GPU, until `semaphore` is signalled (by another
    /// API); `buffers` are the ones that API wrote.
    pub fn wait(&self, gl: &glow::Context, semaphore: u32, buffers: &[u32]) -> Result<()> {
        // SAFETY: an imported semaphore and live buffer names; no textures.
        unsafe {
            (self.wait)(semaphore, buffers.len() as u32, buffers.as_ptr(), 0, std::ptr::null(), std::ptr::null());
        }
        check_error(gl, "glWaitSemaphoreEXT")
    }

    /// Signals `semaphore` once GL's earlier commands are done with `buffers`, and flushes, so
    /// another API's wait for it may be issued at once.
    pub fn signal(&self, gl: &glow::Context, semaphore: u32, buffers: &[u32]) -> Result<()> {
        // SAFETY: as in `wait`.
        unsafe {
            (self.signal)(semaphore, buffers.len() as u32, buffers.as_ptr(), 0, std::ptr::null(), std::ptr::null());
            gl.flush();
        }
        check_error(gl, "glSignalSemaphoreEXT")
    }

    /// `glFinish`: waits until GL has executed every command given (before its semaphores go,
    /// where no `glow::Context` is at hand). The context must be current.
    pub fn finish(&self) {
        // SAFETY: a core entry point of the current context.
        unsafe { (self.finish)() };
    }

    /// Deletes a semaphore made by [`Self::import`].
    pub fn delete(&self, semaphore: u32) {
        // SAFETY: a name created by `import`, deleted once.
        unsafe { (self.delete)(1, &semaphore) };
    }
}
