//! The vector-Jacobian product of a ResNet's later stages, written as forward tensor operations.
//!
//! Grad-CAM at an inner stage weighs its channels by the gradient of a score with respect to
//! that stage's map. Similarity mining differentiates the resulting attention again (Zheng et
//! al., Sec. 3.2), which Burn's first-order autodiff cannot do through its own backward pass. In
//! eval mode a ResNet stage is piecewise linear in its input: convolutions, batch norm with fixed
//! statistics (a per-channel affine map) and ReLUs, whose derivative is a 0/1 mask. Its
//! vector-Jacobian product is therefore transposed convolutions, per-channel scales and those
//! masks, all ordinary differentiable operations; the masks are constants, exactly as the
//! derivative of PyTorch's ReLU backward is zero.

use burn::nn::conv::Conv2d;
use burn::nn::{BatchNorm, PaddingConfig2d};
use burn::tensor::Tensor;
use burn::tensor::activation::relu;
use burn::tensor::module::conv_transpose2d;
use burn::tensor::ops::ConvTransposeOptions;

use crate::error::ModelError;
use crate::resnet::{Block, ResNet};

/// Batch norm with its running statistics as `(scale, shift)` per channel `[C]`:
/// `bn(x) = scale · x + shift`.
fn eval_affine(bn: &BatchNorm) -> (Tensor<1>, Tensor<1>) {
    let var = bn.running_var.value();
    let mean = bn.running_mean.value();
    let scale = bn.gamma.val() / var.add_scalar(bn.epsilon).sqrt();
    let shift = bn.beta.val() - mean * scale.clone();
    (scale, shift)
}

fn per_channel(v: Tensor<1>) -> Tensor<4> {
    v.unsqueeze_dims::<4>(&[0, 2, 3])
}

/// Conv + eval-mode batch norm: `[B, C, H, W]` → `[B, O, Ho, Wo]`.
fn conv_bn_eval(conv: &Conv2d, bn: &BatchNorm, x: Tensor<4>) -> Tensor<4> {
    let (scale, shift) = eval_affine(bn);
    conv.forward(x) * per_channel(scale) + per_channel(shift)
}

/// The transpose of `conv` (no bias) applied to `grad` `[B, O, Ho, Wo]`, producing the input
/// size `[H, W]` the convolution consumed (a strided convolution maps several input sizes to one
/// output size, so it has to be given).
fn conv_transpose(conv: &Conv2d, grad: Tensor<4>, input: [usize; 2]) -> Result<Tensor<4>, ModelError> {
    let [pad_h, pad_w] = match &conv.padding {
        PaddingConfig2d::Explicit(top, left, bottom, right) if top == bottom && left == right => [*top, *left],
        PaddingConfig2d::Valid => [0, 0],
        other => {
            return Err(ModelError::Config(format!(
                "the ResNet stage's gradient supports symmetric explicit padding only, not {other:?}"
            )));
        }
    };
    let [_, _, ho, wo] = grad.dims();
    let produced = |out: usize, stride: usize, pad: usize, kernel: usize, dilation: usize| {
        ((out - 1) * stride + dilation * (kernel - 1) + 1).saturating_sub(2 * pad)
    };
    let h = produced(ho, conv.stride[0], pad_h, conv.kernel_size[0], conv.dilation[0]);
    let w = produced(wo, conv.stride[1], pad_w, conv.kernel_size[1], conv.dilation[1]);
    let options = ConvTransposeOptions::new(
        conv.stride,
        [pad_h, pad_w],
        [input[0] - h, input[1] - w],
        conv.dilation,
        conv.groups,
    );
    Ok(conv_transpose2d(grad, conv.weight.val(), None, options))
}

fn relu_mask(pre: &Tensor<4>) -> Tensor<4> {
    pre.clone().greater_elem(0.0).float()
}

impl Block {
    /// The block's output in eval mode and what its vector-Jacobian product needs.
    fn forward_eval(&self, x: Tensor<4>) -> (Tensor<4>, BlockTape) {
        let identity = match &self.downsample {
            Some(d) => conv_bn_eval(&d.conv, &d.bn, x.clone()),
            None => x.clone(),
        };
        let c1 = conv_bn_eval(&self.conv1, &self.bn1, x.clone());
        let c2 = conv_bn_eval(&self.conv2, &self.bn2, relu(c1.clone()));
        let (c2, c3) = match (&self.conv3, &self.bn3) {
            (Some(conv3), Some(bn3)) => {
                let c3 = conv_bn_eval(conv3, bn3, relu(c2.clone()));
                (c2, Some(c3))
            }
            _ => (c2, None),
        };
        let last = c3.clone().unwrap_or_else(|| c2.clone());
        let sum = last + identity;
        let [_, _, h, w] = x.dims();
        let mid = [c1.dims()[2], c1.dims()[3]];
        let tape = BlockTape {
            input: [h, w],
            mid,
            c1,
            c2: c3.is_some().then_some(c2),
            sum: sum.clone(),
        };
        (relu(sum), tape)
    }

    /// `grad` `[B, C_out, Ho, Wo]` of the block's output → the gradient of its input.
    fn backward_eval(&self, tape: &BlockTape, grad: Tensor<4>) -> Result<Tensor<4>, ModelError> {
        let gz = grad * relu_mask(&tape.sum);
        let scaled = |bn: &BatchNorm, g: Tensor<4>| g * per_channel(eval_affine(bn).0);
        let mut g = gz.clone();
        if let (Some(conv3), Some(bn3), Some(c2)) = (&self.conv3, &self.bn3, &tape.c2) {
            g = conv_transpose(conv3, scaled(bn3, g), [c2.dims()[2], c2.dims()[3]])? * relu_mask(c2);
        }
        // The middle convolution maps the first one's output (size `mid`) to the block output size.
        g = conv_transpose(&self.conv2, scaled(&self.bn2, g), tape.mid)? * relu_mask(&tape.c1);
        let main = conv_transpose(&self.conv1, scaled(&self.bn1, g), tape.input)?;
        let shortcut = match &self.downsample {
            Some(d) => conv_transpose(&d.conv, scaled(&d.bn, gz), tape.input)?,
            None => gz,
        };
        Ok(main + shortcut)
    }
}

/// The pre-activations of one block, whose signs are the ReLU masks of its backward pass.
struct BlockTape {
    input: [usize; 2],
    mid: [usize; 2],
    c1: Tensor<4>,
    /// The bottleneck's second pre-activation (a basic block has none).
    c2: Option<Tensor<4>>,
    sum: Tensor<4>,
}

impl ResNet {
    /// The gradient of a function of `layer4` with respect to the map of stage `stage`, in eval
    /// mode (batch norm with its running statistics), as differentiable tensor operations: given
    /// `map` `[B, C_s, H_s, W_s]` (the output of stage `stage`, see [`ResNet::STAGE_NAMES`]) and
    /// `grad` `[B, C_4, H_4, W_4]` (the function's gradient at `forward_from(stage, map)`), returns
    /// `[B, C_s, H_s, W_s]`. Unlike autodiff's value, the result stays on the graph of `map`, `grad`
    /// and the weights, so a loss of it can be differentiated (see the module documentation).
    pub fn backward_from(&self, stage: usize, map: Tensor<4>, grad: Tensor<4>) -> Result<Tensor<4>, ModelError> {
        if stage >= Self::STAGE_NAMES.len() {
            return Err(ModelError::Config(format!("ResNet has no stage {stage}")));
        }
        let layers = [&self.layer1, &self.layer2, &self.layer3, &self.layer4];
        let blocks: Vec<&Block> = layers[stage..].iter().flat_map(|l| l.iter()).collect();
        let mut x = map;
        let mut tapes = Vec::with_capacity(blocks.len());
        for block in &blocks {
            let (out, tape) = block.forward_eval(x);
            tapes.push(tape);
            x = out;
        }
        if x.dims() != grad.dims() {
            return Err(ModelError::Config(format!(
                "gradient {:?} does not match layer4 {:?}",
                grad.dims(),
                x.dims()
            )));
        }
        blocks
            .iter()
            .zip(&tapes)
            .rev()
            .try_fold(grad, |g, (block, tape)| block.backward_eval(tape, g))
    }
}
