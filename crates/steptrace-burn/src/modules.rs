//! One walk over a model's parameters, each with its path in the module tree
//! (`blocks.1.inner.weight`): what kernel attribution, the memory categories, the burn-train
//! wrapper and the initial-state records all read, spelled one way.

use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::{Bool, Int, Tensor};

/// What a [`walk`] does with each parameter. Every method does nothing by default.
pub trait ParamVisitor {
    /// A float parameter at `path`.
    fn float<const D: usize>(&mut self, path: &str, param: &Param<Tensor<D>>) {
        let _ = (path, param);
    }
    /// An integer parameter at `path`.
    fn int<const D: usize>(&mut self, path: &str, param: &Param<Tensor<D, Int>>) {
        let _ = (path, param);
    }
    /// A boolean parameter at `path`.
    fn bool<const D: usize>(&mut self, path: &str, param: &Param<Tensor<D, Bool>>) {
        let _ = (path, param);
    }
}

/// Visits every parameter of `model` in burn's visiting order, with its path: the names of the
/// fields and list indices that lead to it, joined by `.`, its own field name last. A lazy
/// parameter is handed over as it is (not drawn).
pub fn walk<M: Module, V: ParamVisitor>(model: &M, visitor: &mut V) {
    let mut walk = Walk { path: String::new(), starts: Vec::new(), visitor };
    model.visit(&mut walk);
}

struct Walk<'v, V> {
    /// The path so far, and where each entered name starts in it.
    path: String,
    starts: Vec<usize>,
    visitor: &'v mut V,
}

impl<V: ParamVisitor> ModuleVisitor for Walk<'_, V> {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.starts.push(self.path.len());
        if !name.is_empty() {
            if !self.path.is_empty() {
                self.path.push('.');
            }
            self.path.push_str(name);
        }
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        if let Some(start) = self.starts.pop() {
            self.path.truncate(start);
        }
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        self.visitor.float(&self.path, param);
    }

    fn visit_int<const D: usize>(&mut self, param: &Param<Tensor<D, Int>>) {
        self.visitor.int(&self.path, param);
    }

    fn visit_bool<const D: usize>(&mut self, param: &Param<Tensor<D, Bool>>) {
        self.visitor.bool(&self.path, param);
    }
}

/// The module holding a parameter, as a span path: its path without the parameter's own
/// name, with ` > ` between modules (`blocks.1.inner.weight` is `blocks.1 > inner`), so that
/// a report's tree sums a block's layers under the block; an index stays with the list it
/// indexes. A parameter of the root module keeps its name.
pub fn span_path(param_path: &str) -> String {
    let module = match param_path.rsplit_once('.') {
        Some((module, _)) if !module.is_empty() => module,
        _ => param_path,
    };
    let mut parts: Vec<String> = Vec::new();
    for part in module.split('.').filter(|p| !p.is_empty()) {
        match parts.last_mut() {
            Some(last) if part.chars().all(|c| c.is_ascii_digit()) => {
                last.push('.');
                last.push_str(part);
            }
            _ => parts.push(part.to_owned()),
        }
    }
    parts.join(" > ")
}

#[cfg(all(test, feature = "cpu"))]
mod tests {
    use burn::nn::{Linear, LinearConfig};
    use burn::prelude::*;

    use super::*;

    #[derive(Module, Debug)]
    struct Block {
        inner: Linear,
    }

    #[derive(Module, Debug)]
    struct Net {
        blocks: Vec<Block>,
        head: Linear,
    }

    #[derive(Default)]
    struct Paths(Vec<(String, Vec<usize>)>);

    impl ParamVisitor for Paths {
        fn float<const D: usize>(&mut self, path: &str, param: &Param<Tensor<D>>) {
            self.0.push((path.to_owned(), param.lazy_shape().to_vec()));
        }
    }

    #[test]
    fn every_parameter_comes_with_its_path_in_the_tree() {
        let device = Device::flex();
        let linear = |i, o| LinearConfig::new(i, o).init(&device);
        let net =
            Net { blocks: vec![Block { inner: linear(2, 3) }, Block { inner: linear(3, 3) }], head: linear(3, 1) };
        let mut paths = Paths::default();
        walk(&net, &mut paths);
        let names: Vec<&str> = paths.0.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            names,
            [
                "blocks.0.inner.weight",
                "blocks.0.inner.bias",
                "blocks.1.inner.weight",
                "blocks.1.inner.bias",
                "head.weight",
                "head.bias"
            ]
        );
        assert_eq!(paths.0[0].1, vec![2, 3]);
        assert_eq!(span_path("blocks.1.inner.weight"), "blocks.1 > inner");
        assert_eq!(span_path("head.bias"), "head");
        assert_eq!(span_path("scale"), "scale");
    }
}
