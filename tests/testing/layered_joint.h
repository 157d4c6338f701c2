// layered_joint.h — hand-built joint training graphs of identical layers, in the node orders and
// shapes that tracers other than remat.torch.trace give: for the tests of chain extraction and
// rk-GB blocks. An embedding (and a GELU), the layers, a final layer norm, a head and a sum as
// the loss. Each layer: a layer norm with three outputs, a matrix product, a ReLU or a mask, a
// dropout drawn in place (bernoulli_ on an empty tensor), a second product and the residual add;
// its backward reads the transposed activations and weights through views.
//   const Graph g = testing::layered_joint({.layers = 4, .late_views = true});
#pragma once

#include <string>
#include <vector>

#include "remat/graph.h"

namespace remat::testing {

struct LayeredJointOptions {
  int32_t layers = 4;
  int64_t width = 4096;  // bytes of an activation
  // The backward's helper views (transposes of activations and weights) as forward nodes at the
  // end of the forward, where a tracer that sets phases by data flow puts them; else backward
  // nodes at the start of the backward.
  bool late_views = false;
  bool shared_mask = false;    // a small mask made before the embedding, read by every layer
  int64_t crossing_bytes = 0;  // > 0: a value this large made before the layers, read by each
  // That value made from the tokens before the embedding and read by the loss too: it crosses
  // every position of the forward.
  bool crossing_everywhere = false;
  // > 0: an encoder of this many layers and a final norm first, whose output every layer of the
  // decoder (the `layers`, after an embedding of their own) reads, as cross-attention does.
  int32_t encoder_layers = 0;
};

class LayeredJointBuilder {
 public:
  explicit LayeredJointBuilder(const LayeredJointOptions& o) : o_(o) {}

  Graph build() {
    const ValueId tokens = value("tokens", 64);
    if (o_.shared_mask) {
      mask_ = value("mask", 64);
      forward("make_mask", "aten.triu", OpKind::kPointwise, {}, {mask_});
    }
    if (o_.crossing_everywhere) make_crossing(tokens);
    ValueId x = embed("embedding", tokens);
    x0_ = x;
    if (o_.crossing_bytes > 0 && !o_.crossing_everywhere) make_crossing(x);
    std::vector<Layer> layers;
    for (int32_t l = 0; l < o_.encoder_layers; ++l) layers.push_back(layer(x, "enc", l));
    if (o_.encoder_layers > 0) {
      encoder_norm_ = layer_norm("enc_final", x);
      encoder_out_ = encoder_norm_.h;
      x = embed("decoder_embedding", value("decoder_tokens", 64));
    }
    for (int32_t l = 0; l < o_.layers; ++l) layers.push_back(layer(x, "layer", l));
    head(x);
    for (auto it = layers.rbegin(); it != layers.rend(); ++it) layer_backward(*it);
    finish_backward();
    GraphSpec spec;
    spec.name = "layered joint";
    spec.values = std::move(values_);
    for (Node& n : forward_) spec.nodes.push_back(std::move(n));
    for (Node& n : views_) {
      n.phase = o_.late_views ? Phase::kForward : Phase::kBackward;
      spec.nodes.push_back(std::move(n));
    }
    for (Node& n : backward_) spec.nodes.push_back(std::move(n));
    return Graph::build(std::move(spec), "layered_joint");
  }

 private:
  struct Norm {
    ValueId x, h, mean, rstd, weight;
    std::string name;
  };
  struct Layer {
    Norm norm;
    ValueId a2, m, w1, w2, w_cross;
    ValueId h_t, d_t, w2_t;  // the backward's views
    std::string name;
    bool cross = false;
  };
  struct Embedding {
    ValueId tokens, embedded;
  };

  ValueId value(std::string name, int64_t size, ValueId alias_of = kNoValue) {
    values_.push_back({.name = std::move(name), .size_bytes = size, .alias_of = alias_of});
    return ValueId{static_cast<int32_t>(values_.size()) - 1};
  }
  ValueId gradient(const std::string& name, int64_t size) {
    const ValueId v = value(name, size);
    values_[static_cast<size_t>(v.value())].is_output = true;
    return v;
  }
  static Node node(std::string name, std::string op, OpKind kind, Phase phase,
                   std::vector<ValueId> in, std::vector<ValueId> out, double cost) {
    return {.name = std::move(name),
            .cost = cost,
            .inputs = std::move(in),
            .outputs = std::move(out),
            .op = std::move(op),
            .kind = kind,
            .phase = phase};
  }
  void forward(std::string name, std::string op, OpKind kind, std::vector<ValueId> in,
               std::vector<ValueId> out, double cost = 1) {
    forward_.push_back(node(std::move(name), std::move(op), kind, Phase::kForward, std::move(in),
                            std::move(out), cost));
  }
  void backward(std::string name, std::string op, OpKind kind, std::vector<ValueId> in,
                std::vector<ValueId> out, double cost = 1) {
    backward_.push_back(node(std::move(name), std::move(op), kind, Phase::kBackward, std::move(in),
                             std::move(out), cost));
  }
  ValueId view_of(const std::string& name, ValueId of) {
    const ValueId v = value(name, 0, of);
    views_.push_back(node(name, "aten.t", OpKind::kView, Phase::kForward, {of}, {v}, 0));
    return v;
  }
  ValueId add(const std::string& name, ValueId a, ValueId b, bool is_forward = true) {
    const ValueId sum = value(name, values_[static_cast<size_t>(a.value())].size_bytes);
    (is_forward ? forward_ : backward_)
        .push_back(node(name, "aten.add", OpKind::kPointwise,
                        is_forward ? Phase::kForward : Phase::kBackward, {a, b}, {sum}, 1));
    return sum;
  }

  // An embedding and a GELU, whose backward reads the embedding (and so stays in its stage).
  ValueId embed(const std::string& name, ValueId tokens) {
    const ValueId table = value("W_" + name, 2048), e = value(name, o_.width);
    const ValueId x = value(name + "_gelu", o_.width);
    forward(name, "aten.embedding", OpKind::kOther, {tokens, table}, {e});
    forward(name + "_gelu", "aten.gelu", OpKind::kPointwise, {e}, {x});
    embeddings_.push_back({tokens, e});
    return x;
  }
  void make_crossing(ValueId from) {
    crossing_from_ = from;
    crossing_ = value("crossing", o_.crossing_bytes);
    crossing_weight_ = value("W_crossing", 1024);
    forward("crossing", "aten.mm", OpKind::kCompute, {from, crossing_weight_}, {crossing_}, 10);
  }
  Norm layer_norm(const std::string& name, ValueId x) {
    Norm n{.x = x,
           .h = value("h_" + name, o_.width),
           .mean = value("mean_" + name, o_.width / 64),
           .rstd = value("rstd_" + name, o_.width / 64),
           .weight = value("W_ln_" + name, 256),
           .name = name};
    forward("ln_" + name, "aten.native_layer_norm", OpKind::kCompute, {x, n.weight},
            {n.h, n.mean, n.rstd}, 4);
    return n;
  }
  ValueId layer_norm_backward(const Norm& n, ValueId g) {
    const ValueId gx = value("g_x_ln_" + n.name, o_.width);
    backward("ln_backward_" + n.name, "aten.native_layer_norm_backward", OpKind::kCompute,
             {g, n.x, n.mean, n.rstd, n.weight}, {gx, gradient("g_W_ln_" + n.name, 256)}, 4);
    return gx;
  }

  Layer layer(ValueId& x, const std::string& prefix, int32_t l) {
    const int64_t w = o_.width;
    Layer y;
    y.name = prefix + std::to_string(l);
    y.cross = encoder_out_.valid();
    const std::string& s = y.name;
    y.norm = layer_norm(s, x);
    y.w1 = value("W1_" + s, 1024);
    y.w2 = value("W2_" + s, 1024);
    ValueId a = value("a_" + s, w);
    forward("mm1_" + s, "aten.mm", OpKind::kCompute, {y.norm.h, y.w1}, {a}, 10);
    if (y.cross) {
      y.w_cross = value("Wc_" + s, 1024);
      const ValueId c = value("c_" + s, w);
      forward("cross_" + s, "aten.mm", OpKind::kCompute, {encoder_out_, y.w_cross}, {c}, 10);
      a = add("add_cross_" + s, a, c);
    }
    y.a2 = value("a2_" + s, w);
    if (o_.shared_mask)
      forward("masked_" + s, "aten.masked_fill", OpKind::kPointwise, {a, mask_}, {y.a2});
    else
      forward("relu_" + s, "aten.relu", OpKind::kPointwise, {a}, {y.a2});
    const ValueId e = value("empty_" + s, w);
    forward("empty_" + s, "aten.empty", OpKind::kOther, {}, {e}, 0);
    y.m = value("bernoulli_" + s, 0, e);
    forward("bernoulli_" + s, "aten.bernoulli_", OpKind::kRandom, {e}, {y.m});
    forward_.back().recomputable = false;
    const ValueId d = value("d_" + s, w);
    forward("dropout_" + s, "aten.mul", OpKind::kPointwise, {y.a2, y.m}, {d});
    ValueId out = value("y_" + s, w);
    forward("mm2_" + s, "aten.mm", OpKind::kCompute, {d, y.w2}, {out}, 10);
    if (crossing_.valid()) out = add("add_crossing_" + s, out, crossing_);
    x = add("residual_" + s, x, out);
    y.h_t = view_of("t_h_" + s, y.norm.h);
    y.d_t = view_of("t_d_" + s, d);
    y.w2_t = view_of("t_W2_" + s, y.w2);
    return y;
  }

  void head(ValueId x) {
    const int64_t w = o_.width;
    head_norm_ = layer_norm("final", x);
    const ValueId wh = value("W_head", 1024), logits = value("logits", w);
    const ValueId loss = value("loss", 4);
    values_[static_cast<size_t>(loss.value())].is_output = true;
    forward("head", "aten.mm", OpKind::kCompute, {head_norm_.h, wh}, {logits}, 10);
    std::vector<ValueId> loss_inputs = {logits};
    if (o_.crossing_everywhere) loss_inputs.push_back(crossing_);
    forward("loss", "aten.sum", OpKind::kReduction, loss_inputs, {loss});
    const ValueId seed = value("seed", 4), g_logits = value("g_logits", w);
    backward("seed", "aten.ones", OpKind::kOther, {}, {seed}, 0);
    backward("loss_backward", "aten.expand", OpKind::kPointwise, {seed}, {g_logits});
    backward("head_weight_grad", "aten.mm", OpKind::kCompute, {head_norm_.h, g_logits},
             {gradient("g_W_head", 1024)}, 10);
    const ValueId g_h = value("g_h_final", w);
    backward("head_input_grad", "aten.mm", OpKind::kCompute, {g_logits, wh}, {g_h}, 10);
    grad_ = layer_norm_backward(head_norm_, g_h);
  }

  void layer_backward(const Layer& y) {
    const int64_t w = o_.width;
    const std::string& s = y.name;
    if (s.rfind("enc", 0) == 0 && !encoder_started_) {
      // The decoder's input gradient ends in its embedding; the encoder's comes from every
      // decoder layer, through the encoder's final norm.
      encoder_started_ = true;
      embedding_backward(1, grad_);
      grad_ = layer_norm_backward(encoder_norm_, encoder_grad_);
    }
    const ValueId g = grad_;
    if (crossing_.valid()) {
      const ValueId sum = value("g_crossing_" + s, o_.crossing_bytes);
      std::vector<ValueId> in = {g};
      if (crossing_grad_.valid()) in.push_back(crossing_grad_);
      backward("sum_crossing_grad_" + s, "aten.add", OpKind::kPointwise, in, {sum});
      crossing_grad_ = sum;
    }
    backward("mm2_weight_grad_" + s, "aten.mm", OpKind::kCompute, {y.d_t, g},
             {gradient("g_W2_" + s, 1024)}, 10);
    const ValueId gd = value("g_d_" + s, w);
    backward("mm2_input_grad_" + s, "aten.mm", OpKind::kCompute, {g, y.w2_t}, {gd}, 10);
    const ValueId ga2 = value("g_a2_" + s, w), ga = value("g_a_" + s, w);
    backward("dropout_backward_" + s, "aten.mul", OpKind::kPointwise, {gd, y.m}, {ga2});
    if (o_.shared_mask)
      backward("masked_backward_" + s, "aten.masked_fill", OpKind::kPointwise, {ga2, mask_}, {ga});
    else
      backward("relu_backward_" + s, "aten.threshold_backward", OpKind::kPointwise, {ga2, y.a2},
               {ga});
    if (y.cross) {
      const ValueId part = value("g_enc_part_" + s, w);
      backward("cross_weight_grad_" + s, "aten.mm", OpKind::kCompute, {encoder_out_, ga},
               {gradient("g_Wc_" + s, 1024)}, 10);
      backward("cross_input_grad_" + s, "aten.mm", OpKind::kCompute, {ga, y.w_cross}, {part}, 10);
      encoder_grad_ = encoder_grad_.valid()
                          ? add("sum_enc_grad_" + s, part, encoder_grad_, /*is_forward=*/false)
                          : part;
    }
    backward("mm1_weight_grad_" + s, "aten.mm", OpKind::kCompute, {y.h_t, ga},
             {gradient("g_W1_" + s, 1024)}, 10);
    const ValueId gh = value("g_h_" + s, w);
    backward("mm1_input_grad_" + s, "aten.mm", OpKind::kCompute, {ga, y.w1}, {gh}, 10);
    grad_ = add("residual_grad_" + s, g, layer_norm_backward(y.norm, gh), /*is_forward=*/false);
  }

  void finish_backward() {
    if (crossing_.valid()) {
      backward("crossing_weight_grad", "aten.mm", OpKind::kCompute,
               {crossing_from_, crossing_grad_}, {gradient("g_W_crossing", 1024)}, 10);
    }
    if (crossing_.valid() && !o_.crossing_everywhere) {
      const ValueId part = value("g_x0_crossing", o_.width);
      backward("crossing_input_grad", "aten.mm", OpKind::kCompute,
               {crossing_grad_, crossing_weight_}, {part}, 10);
      grad_ = add("sum_x0_grad", grad_, part, /*is_forward=*/false);
    }
    embedding_backward(0, grad_);
  }

  void embedding_backward(size_t which, ValueId g) {
    const Embedding& e = embeddings_[which];
    const std::string s = std::to_string(which);
    const ValueId ge = value("g_embedding_" + s, o_.width);
    backward("gelu_backward_" + s, "aten.gelu_backward", OpKind::kPointwise, {g, e.embedded}, {ge});
    backward("embedding_backward_" + s, "aten.embedding_dense_backward", OpKind::kOther,
             {ge, e.tokens}, {gradient("g_W_emb_" + s, 2048)});
  }

  LayeredJointOptions o_;
  std::vector<Value> values_;
  std::vector<Node> forward_, views_, backward_;
  std::vector<Embedding> embeddings_;
  Norm encoder_norm_, head_norm_;
  ValueId x0_ = kNoValue, mask_ = kNoValue, crossing_ = kNoValue, crossing_weight_ = kNoValue;
  ValueId crossing_from_ = kNoValue, encoder_out_ = kNoValue;
  ValueId grad_ = kNoValue, encoder_grad_ = kNoValue, crossing_grad_ = kNoValue;
  bool encoder_started_ = false;
};

inline Graph layered_joint(const LayeredJointOptions& options) {
  return LayeredJointBuilder(options).build();
}

}  // namespace remat::testing
