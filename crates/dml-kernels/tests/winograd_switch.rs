//! `DML_WINOGRAD=0` sends every convolution the direct (im2col) way. A test binary of its own:
//! the switch is read once per process, at the first convolution.

use dml_kernels::conv::{Conv2dShape, WINOGRAD_SWITCH, winograd_enabled};
use dml_kernels::conv_bn::{BnParams, conv_bn_train};

#[test]
#[cfg_attr(not(host_avx512), ignore = "needs AVX-512F, which this CPU lacks")]
fn the_switch_turns_the_winograd_route_off_for_the_whole_process() {
    // SAFETY: this binary's only test sets the variable before anything reads the environment.
    unsafe { std::env::set_var(WINOGRAD_SWITCH, "0") };
    assert!(!winograd_enabled());
    // A layer the Winograd route would take (ResNet-18's first stage, smaller batch): what the
    // block keeps for its backward pass is the unfolded input, `[C·9, B·H·W]`, not the
    // transform `[C, 16, B·⌈H/2⌉·⌈W/2⌉]`.
    let s = Conv2dShape {
        batch: 2,
        channels: 64,
        height: 8,
        width: 8,
        out_channels: 64,
        kernel: [3, 3],
        stride: [1, 1],
        padding: [(1, 1), (1, 1)],
    };
    let x: Vec<f32> = (0..2 * 64 * 64)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
        .collect();
    let w: Vec<f32> = (0..64 * 64 * 9)
        .map(|i| ((i * 53 % 97) as f32 - 48.0) / 480.0)
        .collect();
    let (gamma, beta) = (vec![1.0f32; 64], vec![0.0f32; 64]);
    let bn = BnParams {
        gamma: &gamma,
        beta: &beta,
        epsilon: 1e-5,
    };
    let out = conv_bn_train(&s, &x, &w, bn, true).unwrap();
    let kept = out
        .saved
        .unfolded
        .as_ref()
        .expect("a small unfolded input is kept")
        .len();
    assert_eq!(kept, 64 * 9 * 2 * 8 * 8);
    assert_ne!(kept, 64 * 16 * 2 * 4 * 4);
}
