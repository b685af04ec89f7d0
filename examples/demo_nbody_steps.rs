//! Two parallel loops over one element type, in two functions: the shape of rayon-demo's
//! nbody, whose `tick_par` and `tick_par_reduce` both walk a slice of `Body`.
//!
//! `demo_nbody_steps [BODIES] [STEPS]` (defaults 2,000 and 10): each step runs
//! `tick_par` (a `par_iter_mut` that moves every body) then `tick_par_reduce` (a
//! `par_iter().map().reduce()` that sums their energy). There is no annotation: each function
//! is an implicit region of its own, named after it, however alike their element types are.
//!
//! Prints `steps=<n>`: the steps it ran.

use rayon::prelude::*;
use std::hint::black_box;

#[derive(Clone, Copy)]
pub struct Body {
    position: [f64; 3],
    velocity: [f64; 3],
    mass: f64,
}

/// About a microsecond of arithmetic per body.
fn drift(body: &mut Body) {
    for _ in 0..100 {
        for axis in 0..3 {
            body.position[axis] = black_box(body.position[axis] + body.velocity[axis] * 1e-3);
        }
    }
}

fn energy(body: &Body) -> f64 {
    let mut e = 0.0;
    for _ in 0..100 {
        let v2: f64 = body.velocity.iter().map(|v| v * v).sum();
        e = black_box(e * 0.5 + 0.5 * body.mass * v2);
    }
    e
}

fn tick_par(bodies: &mut [Body]) {
    bodies.par_iter_mut().for_each(drift);
}

fn tick_par_reduce(bodies: &[Body]) -> f64 {
    bodies.par_iter().map(energy).reduce(|| 0.0, |a, b| a + b)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let count: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2_000);
    let steps: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    let mut bodies: Vec<Body> = (0..count)
        .map(|i| Body {
            position: [i as f64, 0.0, 0.0],
            velocity: [1.0, (i % 7) as f64, 0.5],
            mass: 1.0 + (i % 3) as f64,
        })
        .collect();
    let mut total = 0.0;
    for _ in 0..steps {
        tick_par(&mut bodies);
        total += tick_par_reduce(&bodies);
    }
    println!("energy={total:.3}");
    println!("steps={steps}");
}
