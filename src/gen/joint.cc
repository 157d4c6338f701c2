// The `joint` generator (generate.h): a random forward chain of layer patterns and its backward.
// Each forward pattern emits its forward nodes at once and records a closure that emits its
// gradient nodes; the closures run in reverse order after the loss, so the node array is a
// topological order with every forward node before every backward node.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "remat/error.h"
#include "remat/generate.h"
#include "remat/random.h"

namespace remat {
namespace {

// An activation: rows x width elements of `dtype_bytes` each.
struct Act {
  ValueId id;
  int64_t width = 0;
  int64_t dtype_bytes = 4;
};

constexpr int32_t kMaxPatternNodes = 8;  // the largest pattern, accumulations included

void check_params(const JointParams& p) {
  if (p.num_nodes < 5 || p.num_nodes > kMaxGeneratedNodes)
    throw InputError(
        fmt::format("joint: --nodes must be in [5, {}] (got {})", kMaxGeneratedNodes, p.num_nodes));
  if (p.rows < 1) throw InputError(fmt::format("joint: --rows must be >= 1 (got {})", p.rows));
  if (p.min_width < 1 || p.max_width < p.min_width)
    throw InputError(fmt::format("joint: need 1 <= min width <= max width (got {}, {})",
                                 p.min_width, p.max_width));
}

class JointBuilder {
 public:
  explicit JointBuilder(const JointParams& p) : p_(p), rng_(p.seed) {}

  Graph build() {
    spec_.name = fmt::format("joint_n{}_s{}", p_.num_nodes, p_.seed);
    const int64_t width0 = random_width();
    acts_.push_back(Act{add_value("x", p_.rows * width0 * 4), width0, 4});
    linear();  // the first layer reads the data, so gradients reach the parameters at once
    while (planned_nodes() + kMaxPatternNodes + 2 <= p_.num_nodes) random_pattern();
    loss();
    const int64_t planned = planned_nodes();
    for (auto it = backward_.rbegin(); it != backward_.rend(); ++it) (*it)();
    for (ValueId g : param_grads_) spec_.values[static_cast<size_t>(g.value())].is_output = true;
    REMAT_CHECK(static_cast<int64_t>(spec_.nodes.size()) == planned,
                fmt::format("joint: {} nodes, planned {}", spec_.nodes.size(), planned));
    return Graph::build(std::move(spec_), "joint");
  }

 private:
  int64_t planned_nodes() const {
    return static_cast<int64_t>(spec_.nodes.size()) + planned_backward_;
  }

  int64_t random_width() {
    std::vector<int64_t> widths;
    for (int64_t w = 1; w <= p_.max_width; w *= 2)
      if (w >= p_.min_width) widths.push_back(w);
    if (widths.empty()) widths.push_back(p_.min_width);
    return widths[rng_.below(widths.size())];
  }

  ValueId add_value(std::string name, int64_t bytes, ValueId alias_of = kNoValue) {
    const ValueId id{static_cast<int32_t>(spec_.values.size())};
    spec_.values.push_back(
        Value{.name = std::move(name), .size_bytes = bytes, .alias_of = alias_of});
    needs_grad_.push_back(false);
    grad_.push_back(kNoValue);
    return id;
  }

  int64_t bytes(const Act& a) const { return p_.rows * a.width * a.dtype_bytes; }
  int64_t elements(const Act& a) const { return p_.rows * a.width; }
  bool needs_grad(ValueId v) const { return needs_grad_[v] != 0; }

  void add_node(std::string name, std::string op, OpKind kind, Phase phase, double cost,
                std::vector<ValueId> inputs, std::vector<ValueId> outputs,
                bool recomputable = true) {
    spec_.nodes.push_back(Node{.name = std::move(name),
                               .cost = cost,
                               .inputs = std::move(inputs),
                               .outputs = std::move(outputs),
                               .op = std::move(op),
                               .kind = kind,
                               .phase = phase,
                               .recomputable = recomputable});
  }
  void forward(std::string op, OpKind kind, double cost, std::vector<ValueId> inputs,
               std::vector<ValueId> outputs, bool recomputable = true) {
    std::string name = fmt::format("{}_{}", op, spec_.nodes.size());
    add_node(std::move(name), std::move(op), kind, Phase::kForward, cost, std::move(inputs),
             std::move(outputs), recomputable);
  }
  // A backward node `op` with one output of `out_bytes`; returns the output.
  ValueId backward(const std::string& op, OpKind kind, double cost, std::vector<ValueId> inputs,
                   int64_t out_bytes, ValueId alias_of = kNoValue) {
    const std::string name = fmt::format("{}_{}", op, spec_.nodes.size());
    const ValueId out = add_value(name, out_bytes, alias_of);
    add_node(name, op, kind, Phase::kBackward, cost, std::move(inputs), {out});
    return out;
  }

  // Records that `v` is read differentiably once more; the second and later reads each cost one
  // accumulation node in the backward.
  void use(ValueId v) {
    if (!needs_grad(v)) return;
    if (++grad_uses_[v.value()] > 1) ++planned_backward_;
  }
  // Adds a gradient contribution to v (an `add` node when one is already there).
  void add_grad(ValueId v, ValueId g, int64_t v_bytes) {
    if (!grad_[v].valid()) {
      grad_[v] = g;
      return;
    }
    // backward() appends to grad_, so no reference into it may live across the call.
    const ValueId sum = backward("grad_add", OpKind::kPointwise, static_cast<double>(v_bytes) / 4,
                                 {grad_[v], g}, v_bytes);
    grad_[v] = sum;
  }
  ValueId grad(ValueId v) const { return grad_[v]; }

  // A new activation produced by the next forward node.
  Act new_act(std::string_view op, int64_t width, int64_t dtype_bytes, bool differentiable) {
    Act a{add_value(fmt::format("{}_{}", op, spec_.nodes.size()), p_.rows * width * dtype_bytes),
          width, dtype_bytes};
    needs_grad_[a.id] = differentiable;
    return a;
  }
  // Registers the backward closure of a pattern that plans `nodes` gradient nodes.
  void on_backward(int64_t nodes, std::function<void()> emit) {
    planned_backward_ += nodes;
    backward_.push_back(std::move(emit));
  }

  void random_pattern() {
    const double u = rng_.uniform();
    if (u < 0.22) return linear();
    if (u < 0.44) return unary();
    if (u < 0.49) return cosine();
    if (u < 0.61) return binary(/*multiply=*/false);
    if (u < 0.67) return binary(/*multiply=*/true);
    if (u < 0.73) return dropout();
    if (u < 0.80) return rms_norm();
    if (u < 0.85) return layer_norm();
    if (u < 0.89) return softmax();
    if (u < 0.95) return view();
    return cast();
  }

  void linear() {
    const Act x = acts_.back();
    const int64_t in_width = x.width, out_width = random_width();
    const ValueId w = add_value(fmt::format("w_{}", spec_.nodes.size()), in_width * out_width * 4);
    needs_grad_[w] = true;
    const Act y = new_act("linear", out_width, 4, true);
    const double flops = 2.0 * static_cast<double>(p_.rows * in_width * out_width);
    use(x.id);
    use(w);
    forward("linear", OpKind::kCompute, flops, {x.id, w}, {y.id});
    acts_.push_back(y);
    const bool grad_x = needs_grad(x.id);
    on_backward(1 + (grad_x ? 1 : 0), [=, this] {
      const ValueId g = grad(y.id);
      if (grad_x)
        add_grad(x.id, backward("linear_grad_x", OpKind::kCompute, flops, {g, w}, bytes(x)),
                 bytes(x));
      const ValueId gw =
          backward("linear_grad_w", OpKind::kCompute, flops, {g, x.id}, in_width * out_width * 4);
      param_grads_.push_back(gw);
    });
  }

  void unary() {
    static constexpr std::string_view kOps[] = {"relu", "gelu", "tanh", "sigmoid", "exp", "silu"};
    const std::string_view op = kOps[rng_.below(std::size(kOps))];
    // relu, tanh, sigmoid and exp differentiate from their output; gelu and silu from their input.
    const bool from_output = op == "relu" || op == "tanh" || op == "sigmoid" || op == "exp";
    const Act x = acts_.back();
    const Act y = new_act(op, x.width, x.dtype_bytes, needs_grad(x.id));
    const auto n = static_cast<double>(elements(x));
    use(x.id);
    forward(std::string(op), OpKind::kPointwise, 4 * n, {x.id}, {y.id});
    acts_.push_back(y);
    if (!needs_grad(x.id)) return;
    on_backward(1, [=, this] {
      const ValueId saved = from_output ? y.id : x.id;
      add_grad(x.id,
               backward(fmt::format("{}_backward", op), OpKind::kPointwise, 4 * n,
                        {grad(y.id), saved}, bytes(x)),
               bytes(x));
    });
  }

  // y = cos(x): the derivative helper sin(x) reads only forward values (a backward node that the
  // forward could compute, like `sin1` in the min-cut paper's Figure 2).
  void cosine() {
    const Act x = acts_.back();
    const Act y = new_act("cos", x.width, x.dtype_bytes, needs_grad(x.id));
    const auto n = static_cast<double>(elements(x));
    use(x.id);
    forward("cos", OpKind::kPointwise, 4 * n, {x.id}, {y.id});
    acts_.push_back(y);
    if (!needs_grad(x.id)) return;
    on_backward(2, [=, this] {
      const ValueId s = backward("sin", OpKind::kPointwise, 4 * n, {x.id}, bytes(x));
      add_grad(x.id, backward("cos_backward", OpKind::kPointwise, n, {grad(y.id), s}, bytes(x)),
               bytes(x));
    });
  }

  // A residual add or product with an earlier activation of the same shape (a unary op if none).
  void binary(bool multiply) {
    const Act x = acts_.back();
    std::vector<Act> partners;
    for (size_t back = 2; back <= 8 && back <= acts_.size(); ++back) {
      const Act& z = acts_[acts_.size() - back];
      if (z.width == x.width && z.dtype_bytes == x.dtype_bytes) partners.push_back(z);
    }
    if (partners.empty()) return unary();
    const Act z = partners[rng_.below(partners.size())];
    const std::string op = multiply ? "mul" : "add";
    const Act y = new_act(op, x.width, x.dtype_bytes, needs_grad(x.id) || needs_grad(z.id));
    const auto n = static_cast<double>(elements(x));
    use(x.id);
    use(z.id);
    forward(op, OpKind::kPointwise, n, {x.id, z.id}, {y.id});
    acts_.push_back(y);
    if (!multiply) {
      on_backward(0, [=, this] {
        if (needs_grad(x.id)) add_grad(x.id, grad(y.id), bytes(x));
        if (needs_grad(z.id)) add_grad(z.id, grad(y.id), bytes(z));
      });
      return;
    }
    const int64_t planned = (needs_grad(x.id) ? 1 : 0) + (needs_grad(z.id) ? 1 : 0);
    on_backward(planned, [=, this] {
      const ValueId g = grad(y.id);
      if (needs_grad(x.id))
        add_grad(x.id, backward("mul_grad_a", OpKind::kPointwise, n, {g, z.id}, bytes(x)),
                 bytes(x));
      if (needs_grad(z.id))
        add_grad(z.id, backward("mul_grad_b", OpKind::kPointwise, n, {g, x.id}, bytes(z)),
                 bytes(z));
    });
  }

  // Dropout as in the min-cut paper's f2: a float random tensor, a boolean mask, a product. The
  // random node runs once (not recomputable); the backward needs only the mask.
  void dropout() {
    const Act x = acts_.back();
    const auto n = static_cast<double>(elements(x));
    const ValueId r = add_value(fmt::format("rand_{}", spec_.nodes.size()), elements(x) * 4);
    forward("rand_like", OpKind::kRandom, n, {x.id}, {r}, /*recomputable=*/false);
    const ValueId mask = add_value(fmt::format("mask_{}", spec_.nodes.size()), elements(x));
    forward("lt", OpKind::kPointwise, n, {r}, {mask});
    const Act y = new_act("dropout_mul", x.width, x.dtype_bytes, needs_grad(x.id));
    use(x.id);
    forward("dropout_mul", OpKind::kPointwise, n, {x.id, mask}, {y.id});
    acts_.push_back(y);
    if (!needs_grad(x.id)) return;
    on_backward(1, [=, this] {
      add_grad(x.id,
               backward("dropout_backward", OpKind::kPointwise, n, {grad(y.id), mask}, bytes(x)),
               bytes(x));
    });
  }

  // r = sum(x * x) over the features (a reduction to rows values), y = x * rsqrt(r).
  void rms_norm() {
    const Act x = acts_.back();
    const auto n = static_cast<double>(elements(x));
    const ValueId r = add_value(fmt::format("sumsq_{}", spec_.nodes.size()), p_.rows * 4);
    needs_grad_[r] = needs_grad(x.id);
    forward("sumsq", OpKind::kReduction, 2 * n, {x.id}, {r});
    const Act y = new_act("rms_scale", x.width, x.dtype_bytes, needs_grad(x.id));
    use(x.id);  // one gradient contribution: rms_grad_x covers both reads
    forward("rms_scale", OpKind::kPointwise, 2 * n, {x.id, r}, {y.id});
    acts_.push_back(y);
    if (!needs_grad(x.id)) return;
    // The scale's gradient to r is a reduction; r's own gradient flows back to x through sumsq.
    on_backward(2, [=, this] {
      const ValueId g = grad(y.id);
      const ValueId gr =
          backward("rms_grad_r", OpKind::kReduction, 2 * n, {g, x.id, r}, p_.rows * 4);
      add_grad(x.id, backward("rms_grad_x", OpKind::kPointwise, 4 * n, {g, x.id, r, gr}, bytes(x)),
               bytes(x));
    });
  }

  // Layer norm is compute-bound in the paper's model (§3.1): outputs y, mean and rstd.
  void layer_norm() {
    const Act x = acts_.back();
    const auto n = static_cast<double>(elements(x));
    const ValueId gamma = add_value(fmt::format("gamma_{}", spec_.nodes.size()), x.width * 4);
    needs_grad_[gamma] = true;
    const Act y = new_act("layer_norm", x.width, x.dtype_bytes, true);
    const ValueId mean = add_value(fmt::format("ln_mean_{}", spec_.nodes.size()), p_.rows * 4);
    const ValueId rstd = add_value(fmt::format("ln_rstd_{}", spec_.nodes.size()), p_.rows * 4);
    use(x.id);
    use(gamma);
    forward("layer_norm", OpKind::kCompute, 8 * n, {x.id, gamma}, {y.id, mean, rstd});
    acts_.push_back(y);
    on_backward(1, [=, this] {
      const std::string name = fmt::format("layer_norm_backward_{}", spec_.nodes.size());
      const ValueId gg = add_value(name + "_gamma", x.width * 4);
      std::vector<ValueId> outs = {gg};
      ValueId gx = kNoValue;
      if (needs_grad(x.id)) {
        gx = add_value(name + "_x", bytes(x));
        outs.insert(outs.begin(), gx);
      }
      add_node(name, "layer_norm_backward", OpKind::kCompute, Phase::kBackward, 10 * n,
               {grad(y.id), x.id, mean, rstd, gamma}, outs);
      if (gx.valid()) add_grad(x.id, gx, bytes(x));
      param_grads_.push_back(gg);
    });
  }

  void softmax() {
    const Act x = acts_.back();
    const auto n = static_cast<double>(elements(x));
    const Act y = new_act("softmax", x.width, x.dtype_bytes, needs_grad(x.id));
    use(x.id);
    forward("softmax", OpKind::kReduction, 5 * n, {x.id}, {y.id});
    acts_.push_back(y);
    if (!needs_grad(x.id)) return;
    on_backward(1, [=, this] {
      add_grad(
          x.id,
          backward("softmax_backward", OpKind::kReduction, 4 * n, {grad(y.id), y.id}, bytes(x)),
          bytes(x));
    });
  }

  // A reshape: an alias of its input (size 0); its gradient is a view of the output's gradient.
  void view() {
    const Act x = acts_.back();
    const ValueId y = add_value(fmt::format("view_{}", spec_.nodes.size()), 0, x.id);
    needs_grad_[y] = needs_grad(x.id);
    use(x.id);
    forward("view", OpKind::kView, 0, {x.id}, {y});
    acts_.push_back(Act{y, x.width, x.dtype_bytes});
    if (!needs_grad(x.id)) return;
    on_backward(1, [=, this] {
      const ValueId g = grad(y);
      add_grad(x.id, backward("view_backward", OpKind::kView, 0, {g}, 0, g), bytes(x));
    });
  }

  // float32 <-> float16.
  void cast() {
    const Act x = acts_.back();
    const auto n = static_cast<double>(elements(x));
    const Act y = new_act("cast", x.width, x.dtype_bytes == 4 ? 2 : 4, needs_grad(x.id));
    use(x.id);
    forward("cast", OpKind::kPointwise, n, {x.id}, {y.id});
    acts_.push_back(y);
    if (!needs_grad(x.id)) return;
    on_backward(1, [=, this] {
      add_grad(x.id, backward("cast_backward", OpKind::kPointwise, n, {grad(y.id)}, bytes(x)),
               bytes(x));
    });
  }

  // loss = mean(last activation); the backward starts from the seed grad_loss.
  void loss() {
    const Act x = acts_.back();
    const auto n = static_cast<double>(elements(x));
    const ValueId loss = add_value("loss", 4);
    spec_.values[static_cast<size_t>(loss.value())].is_output = true;
    use(x.id);
    forward("mean", OpKind::kReduction, n, {x.id}, {loss});
    const ValueId seed = add_value("grad_loss", 4);
    on_backward(1, [=, this] {
      add_grad(x.id, backward("mean_backward", OpKind::kPointwise, n, {seed}, bytes(x)), bytes(x));
    });
  }

  const JointParams& p_;
  Rng rng_;
  GraphSpec spec_;
  std::vector<Act> acts_;
  IdVector<ValueId, char> needs_grad_;              // by value id
  IdVector<ValueId, ValueId> grad_;                 // by value id: current gradient
  std::unordered_map<int32_t, int32_t> grad_uses_;  // differentiable reads per value id
  std::vector<std::function<void()>> backward_;     // one closure per forward pattern
  std::vector<ValueId> param_grads_;
  int64_t planned_backward_ = 0;
};

}  // namespace

Graph generate_joint(const JointParams& params) {
  check_params(params);
  return JointBuilder(params).build();
}

}  // namespace remat
