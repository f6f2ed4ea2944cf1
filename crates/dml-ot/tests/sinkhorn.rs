//! Invariants of the Sinkhorn solvers: marginals, non-negativity, agreement of the four paths, small
//! `eps` without underflow, zero-mass marginals without NaN, convergence reporting and settings errors.

mod common;

use burn::tensor::{DType, Device, Tensor};
use common::{Rng, host, tensor};
use dml_ot::{OtError, PlanGradient, SinkhornConfig, SinkhornEngine};

/// A batch of random problems: costs in `[0, 2)`, marginals with entries in `[0.05, 1.05)` normalised.
fn problems(rng: &mut Rng, batch: usize, n: usize, m: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let cost = (0..batch * n * m).map(|_| 2.0 * rng.uniform()).collect();
    let marginal = |rng: &mut Rng, k: usize| -> Vec<f64> {
        (0..batch)
            .flat_map(|_| {
                let v: Vec<f64> = (0..k).map(|_| rng.uniform() + 0.05).collect();
                let s: f64 = v.iter().sum();
                v.into_iter().map(move |x| x / s)
            })
            .collect()
    };
    let a = marginal(rng, n);
    let b = marginal(rng, m);
    (cost, a, b)
}

/// `max(|T 1 - a|∞, |Tᵀ 1 - b|∞)` of each `[n, m]` plan of a batch.
fn marginal_errors(plans: &[f64], a: &[f64], b: &[f64], n: usize, m: usize) -> Vec<f64> {
    plans
        .chunks_exact(n * m)
        .enumerate()
        .map(|(item, plan)| {
            let mut err: f64 = 0.0;
            for i in 0..n {
                let s: f64 = plan[i * m..(i + 1) * m].iter().sum();
                err = err.max((s - a[item * n + i]).abs());
            }
            for j in 0..m {
                let s: f64 = (0..n).map(|i| plan[i * m + j]).sum();
                err = err.max((s - b[item * m + j]).abs());
            }
            err
        })
        .collect()
}

fn config(eps: f64, absorb_every: usize, gradient: PlanGradient) -> SinkhornConfig {
    SinkhornConfig {
        eps,
        max_iters: 5000,
        tolerance: 1e-10,
        absorb_every,
        gradient,
        ..SinkhornConfig::default()
    }
}

#[test]
fn every_path_meets_the_marginals_and_agrees_with_the_host_solver() {
    let mut rng = Rng::new(7);
    let (batch, n, m) = (5, 9, 6);
    let (cost, a, b) = problems(&mut rng, batch, n, m);
    let device = Device::flex();
    let reference = config(0.1, 10, PlanGradient::Detached)
        .init()
        .unwrap()
        .solve_host(&cost, &a, &b, [batch, n, m])
        .unwrap();
    assert!(
        reference.convergence.iter().all(|c| c.converged),
        "{:?}",
        reference.convergence
    );
    assert!(
        marginal_errors(&reference.plans, &a, &b, n, m)
            .iter()
            .all(|&e| e <= 1e-10)
    );
    for (engine, absorb, gradient) in [
        (SinkhornEngine::Host, 10, PlanGradient::Unrolled),
        (SinkhornEngine::Tensor, 10, PlanGradient::Unrolled),
        (SinkhornEngine::Tensor, 1, PlanGradient::Unrolled),
        (SinkhornEngine::Host, 10, PlanGradient::Implicit),
        (SinkhornEngine::Host, 3, PlanGradient::Detached),
        (SinkhornEngine::Tensor, 3, PlanGradient::Detached),
    ] {
        let label = format!("{engine:?}/{gradient:?}");
        let out = SinkhornConfig {
            engine,
            ..config(0.1, absorb, gradient.clone())
        }
        .init()
        .unwrap()
        .forward(
            tensor(&cost, [batch, n, m], &device),
            tensor(&a, [batch, n], &device),
            tensor(&b, [batch, m], &device),
        );
        assert!(out.all_converged(), "{label}/{absorb}: {:?}", out.convergence);
        let plans = host(out.plan);
        assert!(plans.iter().all(|&t| t >= 0.0), "{label}/{absorb}: negative plan entry");
        for (item, err) in marginal_errors(&plans, &a, &b, n, m).into_iter().enumerate() {
            assert!(err <= 1e-10, "{label}/{absorb}: item {item} marginal error {err}");
            assert!((out.convergence[item].marginal_error - err).abs() < 1e-12);
        }
        for (got, want) in plans.iter().zip(&reference.plans) {
            assert!(
                (got - want).abs() <= 1e-9 + 1e-7 * want.abs(),
                "{label}/{absorb}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn small_eps_does_not_underflow_in_f32() {
    // At eps = 0.01 the plain kernel exp(-C / eps) of costs up to 2 reaches exp(-200), far below the
    // smallest f32 (about exp(-103) with subnormals): the kernel-space iteration would divide by zero.
    let mut rng = Rng::new(11);
    let (batch, n, m) = (4, 16, 16);
    let (cost, a, b) = problems(&mut rng, batch, n, m);
    let eps = 0.01;
    let underflowing = cost.iter().filter(|&&c| ((-c / eps) as f32).exp() == 0.0).count();
    assert!(
        underflowing > cost.len() / 4,
        "the test must exercise underflow ({underflowing} entries)"
    );

    let reference = SinkhornConfig {
        max_iters: 100_000,
        ..config(eps, 10, PlanGradient::Detached)
    }
    .init()
    .unwrap()
    .solve_host(&cost, &a, &b, [batch, n, m])
    .unwrap();
    assert!(reference.convergence.iter().all(|c| c.converged));
    let device = Device::flex();
    for (engine, absorb) in [
        (SinkhornEngine::Host, 10),
        (SinkhornEngine::Tensor, 1),
        (SinkhornEngine::Tensor, 10),
    ] {
        let out = SinkhornConfig {
            engine: engine.clone(),
            max_iters: 20_000,
            tolerance: 2e-6,
            ..config(eps, absorb, PlanGradient::Unrolled)
        }
        .init()
        .unwrap()
        .forward(
            Tensor::<3>::from_data(tensor(&cost, [batch, n, m], &device).into_data(), (&device, DType::F32)),
            Tensor::<2>::from_data(tensor(&a, [batch, n], &device).into_data(), (&device, DType::F32)),
            Tensor::<2>::from_data(tensor(&b, [batch, m], &device).into_data(), (&device, DType::F32)),
        );
        assert_eq!(out.plan.dtype(), DType::F32);
        assert!(out.all_converged(), "{engine:?}/{absorb}: {:?}", out.convergence);
        let plans = host(out.plan);
        assert!(plans.iter().all(|t| t.is_finite() && *t >= 0.0));
        // f32 carries the log-plan (|L| up to 200) with about 1e-5 relative precision.
        let worst = plans
            .iter()
            .zip(&reference.plans)
            .map(|(g, w)| (g - w).abs())
            .fold(0.0f64, f64::max);
        assert!(worst < 2e-5, "{engine:?}/{absorb}: worst plan difference {worst}");
    }
}

#[test]
fn zero_mass_entries_give_zero_rows_and_columns_without_nan() {
    let mut rng = Rng::new(3);
    let (batch, n, m) = (2, 6, 5);
    let (cost, mut a, mut b) = problems(&mut rng, batch, n, m);
    // Item 0 loses row 2 and column 4, item 1 loses rows 0 and 4; the mass moves to other entries.
    for (item, rows, cols) in [(0, vec![2], vec![4]), (1, vec![0, 4], vec![])] {
        for &i in &rows {
            a[item * n + (i + 1) % n] += a[item * n + i];
            a[item * n + i] = 0.0;
        }
        for &j in &cols {
            b[item * m + (j + 1) % m] += b[item * m + j];
            b[item * m + j] = 0.0;
        }
    }
    let zero_rows = [(0, 2), (1, 0), (1, 4)];
    let zero_cols = [(0, 4)];
    let check = |what: &str, plans: &[f64]| {
        assert!(
            plans.iter().all(|t| t.is_finite()),
            "{what}: NaN or infinity in the plan"
        );
        for &(item, i) in &zero_rows {
            assert!(
                plans[item * n * m + i * m..item * n * m + (i + 1) * m]
                    .iter()
                    .all(|&t| t == 0.0),
                "{what}"
            );
        }
        for &(item, j) in &zero_cols {
            assert!((0..n).all(|i| plans[item * n * m + i * m + j] == 0.0), "{what}");
        }
        assert!(
            marginal_errors(plans, &a, &b, n, m).iter().all(|&e| e <= 1e-9),
            "{what}"
        );
    };
    let solved = config(0.05, 10, PlanGradient::Detached)
        .init()
        .unwrap()
        .solve_host(&cost, &a, &b, [batch, n, m])
        .unwrap();
    check("host", &solved.plans);

    let device = Device::flex().autodiff();
    for (engine, absorb, gradient) in [
        (SinkhornEngine::Host, 10, PlanGradient::Unrolled),
        (SinkhornEngine::Tensor, 10, PlanGradient::Unrolled),
        (SinkhornEngine::Tensor, 1, PlanGradient::Unrolled),
        (SinkhornEngine::Host, 10, PlanGradient::Implicit),
    ] {
        let cost_t = tensor(&cost, [batch, n, m], &device).require_grad();
        let a_t = tensor(&a, [batch, n], &device).require_grad();
        let b_t = tensor(&b, [batch, m], &device).require_grad();
        let out = SinkhornConfig {
            engine: engine.clone(),
            ..config(0.05, absorb, gradient.clone())
        }
        .init()
        .unwrap()
        .forward(cost_t.clone(), a_t.clone(), b_t.clone());
        let what = format!("{engine:?}/{gradient:?}/{absorb}");
        assert!(out.all_converged(), "{what}: {:?}", out.convergence);
        let weights = tensor(
            &cost.iter().map(|c| c.sin()).collect::<Vec<_>>(),
            [batch, n, m],
            &device,
        );
        let loss = (out.plan.clone() * weights).sum();
        check(&what, &host(out.plan));
        let grads = loss.backward();
        for (name, g) in [
            ("cost", host(cost_t.grad(&grads).unwrap())),
            ("a", common::host2(a_t.grad(&grads).unwrap())),
            ("b", common::host2(b_t.grad(&grads).unwrap())),
        ] {
            assert!(
                g.iter().all(|x| x.is_finite()),
                "{what}: non-finite gradient for {name}"
            );
        }
    }
}

#[test]
fn host_adjoint_equals_autodiff_through_the_tensor_loop() {
    // The same T iterations, differentiated twice: by Burn's autodiff through the tensor log-domain
    // loop, and by the host engine's hand-written adjoint. In f64 they agree to rounding, for the cost
    // and for both marginals. (With zero-mass entries the iterates differ before convergence: the host
    // engine drops those rows from the first column step, where the tensor loop still weighs them at
    // potential 0; the zero-mass test and the unit tests cover that case.)
    let mut rng = Rng::new(19);
    let (batch, n, m) = (3, 7, 5);
    let (cost, a, b) = problems(&mut rng, batch, n, m);
    let weights: Vec<f64> = cost.iter().map(|c| (3.0 * c).cos()).collect();
    let device = Device::flex().autodiff();
    let run = |engine: SinkhornEngine, absorb: usize| {
        let cost_t = tensor(&cost, [batch, n, m], &device).require_grad();
        let a_t = tensor(&a, [batch, n], &device).require_grad();
        let b_t = tensor(&b, [batch, m], &device).require_grad();
        let out = SinkhornConfig {
            eps: 0.07,
            max_iters: 25,
            tolerance: 0.0,
            absorb_every: absorb,
            engine,
            ..SinkhornConfig::default()
        }
        .init()
        .unwrap()
        .forward(cost_t.clone(), a_t.clone(), b_t.clone());
        assert_eq!(out.iterations, 25);
        let plan = host(out.plan.clone());
        let grads = (out.plan * tensor(&weights, [batch, n, m], &device)).sum().backward();
        (
            plan,
            host(cost_t.grad(&grads).unwrap()),
            common::host2(a_t.grad(&grads).unwrap()),
            common::host2(b_t.grad(&grads).unwrap()),
        )
    };
    let tape = run(SinkhornEngine::Tensor, 1);
    let adjoint = run(SinkhornEngine::Host, 10);
    for (name, want, got) in [
        ("plan", &tape.0, &adjoint.0),
        ("d/dcost", &tape.1, &adjoint.1),
        ("d/da", &tape.2, &adjoint.2),
        ("d/db", &tape.3, &adjoint.3),
    ] {
        let scale = want.iter().fold(0.0f64, |acc, x| acc.max(x.abs()));
        assert!(scale > 0.0, "{name}: all zero");
        for (k, (w, g)) in want.iter().zip(got.iter()).enumerate() {
            assert!(
                (w - g).abs() <= 1e-9 * scale,
                "{name}[{k}]: autodiff {w} vs adjoint {g}"
            );
        }
    }
}

#[test]
fn convergence_reports_iterations_and_the_cap() {
    let mut rng = Rng::new(5);
    let (batch, n, m) = (3, 8, 8);
    let (cost, a, b) = problems(&mut rng, batch, n, m);
    let device = Device::flex();
    let run = |max_iters: usize, tolerance: f64| {
        SinkhornConfig {
            eps: 0.05,
            max_iters,
            tolerance,
            check_every: 1,
            ..SinkhornConfig::default()
        }
        .init()
        .unwrap()
        .forward(
            tensor(&cost, [batch, n, m], &device),
            tensor(&a, [batch, n], &device),
            tensor(&b, [batch, m], &device),
        )
    };
    // Three iterations cannot reach 1e-9: the cap is reported with the actual error.
    let capped = run(3, 1e-9);
    assert_eq!(capped.iterations, 3);
    assert!(
        capped
            .convergence
            .iter()
            .all(|c| !c.converged && c.iterations == 3 && c.marginal_error > 1e-9)
    );
    // With a reachable tolerance the batch stops early and each item reports when it got there.
    let done = run(10_000, 1e-7);
    assert!(done.all_converged() && done.iterations < 10_000);
    assert!(
        done.convergence
            .iter()
            .all(|c| c.iterations <= done.iterations && c.marginal_error <= 1e-7)
    );
    assert!(done.convergence.iter().any(|c| c.iterations == done.iterations));
    // Tolerance 0 runs exactly max_iters.
    assert_eq!(run(17, 0.0).iterations, 17);
    // The host solver counts the same way.
    let hosted = SinkhornConfig {
        eps: 0.05,
        max_iters: 3,
        tolerance: 1e-9,
        ..SinkhornConfig::default()
    }
    .init()
    .unwrap()
    .solve_host(&cost, &a, &b, [batch, n, m])
    .unwrap();
    assert!(hosted.convergence.iter().all(|c| !c.converged && c.iterations == 3));
}

#[test]
fn settings_and_host_inputs_are_validated_with_named_errors() {
    assert_eq!(
        SinkhornConfig {
            eps: 0.0,
            ..SinkhornConfig::default()
        }
        .init()
        .unwrap_err(),
        OtError::Eps(0.0)
    );
    assert_eq!(
        SinkhornConfig {
            max_iters: 0,
            ..SinkhornConfig::default()
        }
        .init()
        .unwrap_err(),
        OtError::ZeroIterations
    );
    assert!(matches!(
        SinkhornConfig {
            tolerance: -1.0,
            ..SinkhornConfig::default()
        }
        .init(),
        Err(OtError::Tolerance(_))
    ));
    assert_eq!(
        SinkhornConfig {
            absorb_every: 0,
            ..SinkhornConfig::default()
        }
        .init()
        .unwrap_err(),
        OtError::Zero { input: "absorb_every" }
    );
    let s = SinkhornConfig::default().init().unwrap();
    let cost = [0.0, 1.0, 1.0, 0.0];
    let e = s.solve_host(&cost, &[0.5, 0.5], &[0.5], [1, 2, 2]).unwrap_err();
    assert!(e.to_string().contains("b:"), "{e}");
    let e = s.solve_host(&cost, &[0.5, -0.5], &[0.5, 0.5], [1, 2, 2]).unwrap_err();
    assert!(
        matches!(
            e,
            OtError::MarginalEntry {
                input: "a",
                index: 1,
                ..
            }
        ),
        "{e}"
    );
    let e = s.solve_host(&cost, &[0.5, 0.5], &[0.9, 0.9], [1, 2, 2]).unwrap_err();
    assert!(matches!(e, OtError::MassMismatch { item: 0, .. }), "{e}");
    let e = s.solve_host(&cost, &[0.0, 0.0], &[0.0, 0.0], [1, 2, 2]).unwrap_err();
    assert!(matches!(e, OtError::ZeroMass { input: "a", item: 0 }), "{e}");
    let e = s
        .solve_host(&[0.0, f64::NAN, 1.0, 0.0], &[0.5, 0.5], &[0.5, 0.5], [1, 2, 2])
        .unwrap_err();
    assert!(
        matches!(
            e,
            OtError::NotFinite {
                input: "cost",
                index: 1,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn host_engine_gradient_on_wgpu_matches_flex() {
    // The adjoint is a backend extension with an implementation per backend: on wgpu (Mesa lavapipe
    // without a GPU) the plan and its gradient must be those of flex, up to f32 rounding.
    let mut rng = Rng::new(29);
    let (batch, n, m) = (2, 4, 3);
    let (cost, a, b) = problems(&mut rng, batch, n, m);
    let weights: Vec<f64> = cost.iter().map(|c| c.sin()).collect();
    let run = |device: Device| {
        let host_device = Device::flex();
        let f32_3 = |values: &[f64], shape: [usize; 3]| {
            Tensor::<3>::from_data(tensor(values, shape, &host_device).into_data(), (&device, DType::F32))
        };
        let f32_2 = |values: &[f64], shape: [usize; 2]| {
            Tensor::<2>::from_data(tensor(values, shape, &host_device).into_data(), (&device, DType::F32))
        };
        let cost_t = f32_3(&cost, [batch, n, m]).require_grad();
        let a_t = f32_2(&a, [batch, n]).require_grad();
        let out = SinkhornConfig {
            eps: 0.1,
            max_iters: 20,
            tolerance: 0.0,
            ..SinkhornConfig::default()
        }
        .init()
        .unwrap()
        .forward(cost_t.clone(), a_t.clone(), f32_2(&b, [batch, m]));
        let grads = (out.plan.clone() * f32_3(&weights, [batch, n, m])).sum().backward();
        (
            host(out.plan),
            host(cost_t.grad(&grads).unwrap()),
            common::host2(a_t.grad(&grads).unwrap()),
        )
    };
    let flex = run(Device::flex().autodiff());
    let wgpu = run(Device::wgpu(burn::tensor::DeviceKind::DefaultDevice).autodiff());
    for (name, want, got) in [
        ("plan", &flex.0, &wgpu.0),
        ("d/dcost", &flex.1, &wgpu.1),
        ("d/da", &flex.2, &wgpu.2),
    ] {
        assert!(want.iter().any(|x| *x != 0.0), "{name}: all zero");
        for (k, (w, g)) in want.iter().zip(got.iter()).enumerate() {
            assert!(
                (w - g).abs() <= 1e-5 * (1.0 + w.abs()),
                "{name}[{k}]: flex {w} vs wgpu {g}"
            );
        }
    }
}
