//! Lists the verbs devices and their first port, as `ibv_devinfo` does: run it against the
//! software device (default build) or rdma-core's libibverbs (`--features vendor`).

use std::ffi::CStr;

use verbs_sys::*;
// The software device provides the symbols unless rdma-core's libibverbs is linked.
#[cfg(not(verbs_vendor))]
use verbs_shmem as _;

fn main() {
    let mut n = 0;
    // SAFETY: the list is used before it is freed; each device is opened and closed here.
    unsafe {
        let list = ibv_get_device_list(&mut n);
        if list.is_null() {
            eprintln!("no verbs devices: {}", std::io::Error::last_os_error());
            std::process::exit(1);
        }
        println!("{n} device(s)");
        for i in 0..n as usize {
            let dev = *list.add(i);
            let name = CStr::from_ptr(ibv_get_device_name(dev)).to_string_lossy();
            let ctx = ibv_open_device(dev);
            if ctx.is_null() {
                println!("{name}: cannot open: {}", std::io::Error::last_os_error());
                continue;
            }
            let mut port: ibv_port_attr = std::mem::zeroed();
            let rc = ibv_query_port(ctx, 1, &mut port);
            let mut gid: ibv_gid = std::mem::zeroed();
            ibv_query_gid(ctx, 1, 0, &mut gid);
            println!(
                "{name}: port 1 rc={rc} state={} lid={} mtu={} gid={:02x?}",
                port.state, port.lid, port.active_mtu, gid.raw
            );
            ibv_close_device(ctx);
        }
        ibv_free_device_list(list);
    }
}
