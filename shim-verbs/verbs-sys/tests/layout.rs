//! The Rust structs against rdma-core's header: a C program compiled against
//! `<infiniband/verbs.h>` prints the size of every struct this crate declares and the offset of
//! every field a BTL or the software device touches; the same list is evaluated in Rust and the
//! two must agree. (Needs a C compiler and `libibverbs-dev`.)

use std::mem::{offset_of, size_of};
use std::process::Command;

use verbs_sys::*;

/// One fact about the layout: the C expression and the Rust value.
struct Fact {
    c: String,
    rust: usize,
}

macro_rules! size {
    ($c:literal, $t:ty) => {
        Fact {
            c: format!("sizeof({})", $c),
            rust: size_of::<$t>(),
        }
    };
}

/// A field whose C designator is spelt like the Rust path.
macro_rules! off {
    ($c:literal, $t:ty, $($f:tt)+) => {
        Fact {
            c: format!("offsetof({}, {})", $c, stringify!($($f)+).replace(' ', "")),
            rust: offset_of!($t, $($f)+),
        }
    };
}

/// A field of an anonymous C union (named in Rust).
macro_rules! off_as {
    ($c:literal, $cf:literal, $t:ty, $($f:tt)+) => {
        Fact {
            c: format!("offsetof({}, {})", $c, $cf),
            rust: offset_of!($t, $($f)+),
        }
    };
}

fn facts() -> Vec<Fact> {
    vec![
        size!("union ibv_gid", ibv_gid),
        off!("union ibv_gid", ibv_gid, global.interface_id),
        size!("struct ibv_device_attr", ibv_device_attr),
        off!("struct ibv_device_attr", ibv_device_attr, node_guid),
        off!("struct ibv_device_attr", ibv_device_attr, max_qp_wr),
        off!("struct ibv_device_attr", ibv_device_attr, max_sge),
        off!("struct ibv_device_attr", ibv_device_attr, max_cqe),
        off!("struct ibv_device_attr", ibv_device_attr, max_qp_rd_atom),
        off!("struct ibv_device_attr", ibv_device_attr, atomic_cap),
        off!("struct ibv_device_attr", ibv_device_attr, max_srq_wr),
        off!("struct ibv_device_attr", ibv_device_attr, max_pkeys),
        off!("struct ibv_device_attr", ibv_device_attr, phys_port_cnt),
        size!("struct ibv_port_attr", ibv_port_attr),
        off!("struct ibv_port_attr", ibv_port_attr, active_mtu),
        off!("struct ibv_port_attr", ibv_port_attr, max_msg_sz),
        off!("struct ibv_port_attr", ibv_port_attr, lid),
        off!("struct ibv_port_attr", ibv_port_attr, link_layer),
        off!("struct ibv_port_attr", ibv_port_attr, port_cap_flags2),
        size!("struct ibv_wc", ibv_wc),
        off!("struct ibv_wc", ibv_wc, status),
        off!("struct ibv_wc", ibv_wc, opcode),
        off!("struct ibv_wc", ibv_wc, byte_len),
        off!("struct ibv_wc", ibv_wc, imm_data),
        off!("struct ibv_wc", ibv_wc, qp_num),
        off!("struct ibv_wc", ibv_wc, src_qp),
        off!("struct ibv_wc", ibv_wc, wc_flags),
        off!("struct ibv_wc", ibv_wc, slid),
        off!("struct ibv_wc", ibv_wc, dlid_path_bits),
        size!("struct ibv_pd", ibv_pd),
        off!("struct ibv_pd", ibv_pd, handle),
        size!("struct ibv_mr", ibv_mr),
        off!("struct ibv_mr", ibv_mr, addr),
        off!("struct ibv_mr", ibv_mr, length),
        off!("struct ibv_mr", ibv_mr, lkey),
        off!("struct ibv_mr", ibv_mr, rkey),
        size!("struct ibv_global_route", ibv_global_route),
        off!("struct ibv_global_route", ibv_global_route, flow_label),
        off!("struct ibv_global_route", ibv_global_route, traffic_class),
        size!("struct ibv_ah_attr", ibv_ah_attr),
        off!("struct ibv_ah_attr", ibv_ah_attr, dlid),
        off!("struct ibv_ah_attr", ibv_ah_attr, is_global),
        off!("struct ibv_ah_attr", ibv_ah_attr, port_num),
        size!("struct ibv_srq_attr", ibv_srq_attr),
        size!("struct ibv_srq_init_attr", ibv_srq_init_attr),
        off!("struct ibv_srq_init_attr", ibv_srq_init_attr, attr.max_sge),
        size!("struct ibv_qp_cap", ibv_qp_cap),
        size!("struct ibv_qp_init_attr", ibv_qp_init_attr),
        off!("struct ibv_qp_init_attr", ibv_qp_init_attr, srq),
        off!(
            "struct ibv_qp_init_attr",
            ibv_qp_init_attr,
            cap.max_inline_data
        ),
        off!("struct ibv_qp_init_attr", ibv_qp_init_attr, qp_type),
        off!("struct ibv_qp_init_attr", ibv_qp_init_attr, sq_sig_all),
        size!("struct ibv_qp_attr", ibv_qp_attr),
        off!("struct ibv_qp_attr", ibv_qp_attr, path_mtu),
        off!("struct ibv_qp_attr", ibv_qp_attr, rq_psn),
        off!("struct ibv_qp_attr", ibv_qp_attr, sq_psn),
        off!("struct ibv_qp_attr", ibv_qp_attr, dest_qp_num),
        off!("struct ibv_qp_attr", ibv_qp_attr, qp_access_flags),
        off!("struct ibv_qp_attr", ibv_qp_attr, cap),
        off!("struct ibv_qp_attr", ibv_qp_attr, ah_attr.dlid),
        off!("struct ibv_qp_attr", ibv_qp_attr, ah_attr.grh.dgid),
        off!("struct ibv_qp_attr", ibv_qp_attr, alt_ah_attr),
        off!("struct ibv_qp_attr", ibv_qp_attr, pkey_index),
        off!("struct ibv_qp_attr", ibv_qp_attr, max_rd_atomic),
        off!("struct ibv_qp_attr", ibv_qp_attr, max_dest_rd_atomic),
        off!("struct ibv_qp_attr", ibv_qp_attr, min_rnr_timer),
        off!("struct ibv_qp_attr", ibv_qp_attr, port_num),
        off!("struct ibv_qp_attr", ibv_qp_attr, timeout),
        off!("struct ibv_qp_attr", ibv_qp_attr, retry_cnt),
        off!("struct ibv_qp_attr", ibv_qp_attr, rnr_retry),
        off!("struct ibv_qp_attr", ibv_qp_attr, rate_limit),
        size!("struct ibv_sge", ibv_sge),
        off!("struct ibv_sge", ibv_sge, length),
        off!("struct ibv_sge", ibv_sge, lkey),
        size!("struct ibv_send_wr", ibv_send_wr),
        off!("struct ibv_send_wr", ibv_send_wr, next),
        off!("struct ibv_send_wr", ibv_send_wr, sg_list),
        off!("struct ibv_send_wr", ibv_send_wr, num_sge),
        off!("struct ibv_send_wr", ibv_send_wr, opcode),
        off!("struct ibv_send_wr", ibv_send_wr, send_flags),
        off!("struct ibv_send_wr", ibv_send_wr, imm_data),
        off!("struct ibv_send_wr", ibv_send_wr, wr.rdma.remote_addr),
        off!("struct ibv_send_wr", ibv_send_wr, wr.rdma.rkey),
        off!("struct ibv_send_wr", ibv_send_wr, wr.atomic.compare_add),
        off!("struct ibv_send_wr", ibv_send_wr, wr.atomic.swap),
        off!("struct ibv_send_wr", ibv_send_wr, wr.atomic.rkey),
        off!("struct ibv_send_wr", ibv_send_wr, wr.ud.remote_qkey),
        off_as!(
            "struct ibv_send_wr",
            "qp_type.xrc.remote_srqn",
            ibv_send_wr,
            qp_type
        ),
        off_as!(
            "struct ibv_send_wr",
            "bind_mw.bind_info.mw_access_flags",
            ibv_send_wr,
            ext.bind_mw.bind_info.mw_access_flags
        ),
        off_as!("struct ibv_send_wr", "tso.mss", ibv_send_wr, ext.tso.mss),
        size!("struct ibv_recv_wr", ibv_recv_wr),
        off!("struct ibv_recv_wr", ibv_recv_wr, num_sge),
        size!("struct ibv_srq", ibv_srq),
        off!("struct ibv_srq", ibv_srq, handle),
        off!("struct ibv_srq", ibv_srq, mutex),
        off!("struct ibv_srq", ibv_srq, cond),
        off!("struct ibv_srq", ibv_srq, events_completed),
        size!("struct ibv_qp", ibv_qp),
        off!("struct ibv_qp", ibv_qp, srq),
        off!("struct ibv_qp", ibv_qp, qp_num),
        off!("struct ibv_qp", ibv_qp, state),
        off!("struct ibv_qp", ibv_qp, qp_type),
        off!("struct ibv_qp", ibv_qp, mutex),
        off!("struct ibv_qp", ibv_qp, events_completed),
        size!("struct ibv_comp_channel", ibv_comp_channel),
        size!("struct ibv_cq", ibv_cq),
        off!("struct ibv_cq", ibv_cq, handle),
        off!("struct ibv_cq", ibv_cq, cqe),
        off!("struct ibv_cq", ibv_cq, mutex),
        off!("struct ibv_cq", ibv_cq, async_events_completed),
        size!("struct ibv_device", ibv_device),
        off!("struct ibv_device", ibv_device, node_type),
        off!("struct ibv_device", ibv_device, name),
        off!("struct ibv_device", ibv_device, ibdev_path),
        size!("struct ibv_context_ops", ibv_context_ops),
        off!("struct ibv_context_ops", ibv_context_ops, poll_cq),
        off!("struct ibv_context_ops", ibv_context_ops, req_notify_cq),
        off!("struct ibv_context_ops", ibv_context_ops, post_srq_recv),
        off!("struct ibv_context_ops", ibv_context_ops, post_send),
        off!("struct ibv_context_ops", ibv_context_ops, post_recv),
        off!(
            "struct ibv_context_ops",
            ibv_context_ops,
            _compat_async_event
        ),
        size!("struct ibv_context", ibv_context),
        off!("struct ibv_context", ibv_context, ops),
        off!("struct ibv_context", ibv_context, cmd_fd),
        off!("struct ibv_context", ibv_context, num_comp_vectors),
        off!("struct ibv_context", ibv_context, mutex),
        off!("struct ibv_context", ibv_context, abi_compat),
    ]
}

#[test]
fn struct_layouts_match_rdma_cores_header() {
    let facts = facts();
    let mut src = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <infiniband/verbs.h>\nint main(void) {\n",
    );
    for f in &facts {
        src += &format!("    printf(\"%zu\\n\", (size_t){});\n", f.c);
    }
    src += "    return 0;\n}\n";
    let dir = std::env::temp_dir().join(format!("verbs-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let c = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&c, &src).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .arg(&c)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("run the C compiler");
    assert!(
        out.status.success(),
        "compiling against <infiniband/verbs.h> failed (is libibverbs-dev installed?):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().expect("run the layout program");
    assert!(run.status.success());
    let c_values: Vec<usize> = String::from_utf8_lossy(&run.stdout)
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(c_values.len(), facts.len());
    let wrong: Vec<String> = facts
        .iter()
        .zip(&c_values)
        .filter(|(f, c)| f.rust != **c)
        .map(|(f, c)| format!("{}: C {} Rust {}", f.c, c, f.rust))
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(wrong.is_empty(), "layouts differ:\n{}", wrong.join("\n"));
}
