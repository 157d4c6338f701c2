// Importer for the NetworkX node-link JSON of the MOCCASIN (RL) and Checkmate (CM) data sets
// (docs/formats.md, NetworkX node-link JSON). Each node produces one value of its output size;
// nodes with no successors are the graph outputs. RL graphs list their default schedule in the
// graph attribute `order`; CM graphs use ascending node id.
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "json_util.h"
#include "remat/io.h"

namespace remat {
namespace {

using io::json;

struct NxNode {
  int64_t id = 0;
  std::string name;
  int64_t size = 0;
  double cost = 0;
  int64_t param_size = 0;
  Phase phase = Phase::kUnknown;
};

int64_t node_id(const json& item, std::string_view source, std::string_view where) {
  if (item.contains("id")) return io::get_int(item, "id", source, where);
  return io::get_int(item, "name", source, where);  // RL files key nodes by "name"
}

NxNode read_nx_node(const json& item, size_t index, std::string_view source) {
  const std::string where = fmt::format("node at index {}", index);
  io::require_object(item, source, where);
  NxNode n;
  n.id = node_id(item, source, where);
  const std::string id_where = fmt::format("node {}", n.id);
  if (item.contains("cost_ram")) {  // Checkmate flavour
    n.size = io::get_int(item, "cost_ram", source, id_where);
    n.cost = io::get_number(item, "cost_cpu", source, id_where);
    n.name = io::get_string_or(item, "name", std::to_string(n.id), source, id_where);
    n.phase = io::get_bool_or(item, "backward", false, source, id_where) ? Phase::kBackward
                                                                         : Phase::kForward;
  } else {  // MOCCASIN random-layered flavour
    n.size = io::get_int(item, "out_cost", source, id_where);
    n.cost = io::get_number(item, "duration", source, id_where);
    n.param_size = io::get_int_or(item, "param_cost", 0, source, id_where);
    n.name = std::to_string(n.id);
  }
  return n;
}

std::pair<int64_t, int64_t> read_edge(const json& link, size_t index, std::string_view source) {
  const std::string where = fmt::format("link at index {}", index);
  io::require_object(link, source, where);
  if (link.contains("source"))
    return {io::get_int(link, "source", source, where), io::get_int(link, "target", source, where)};
  return {io::get_int(link, "0", source, where), io::get_int(link, "1", source, where)};
}

std::vector<int64_t> schedule_ids(const json& doc, const std::vector<NxNode>& nodes,
                                  std::string_view source) {
  std::vector<int64_t> order;
  const json* graph_attrs = doc.contains("graph") ? &doc["graph"] : nullptr;
  if (graph_attrs != nullptr && graph_attrs->is_object() && graph_attrs->contains("order")) {
    const json& list = (*graph_attrs)["order"];
    if (!list.is_array())
      throw InputError(fmt::format("{}: graph attribute 'order' must be an array", source));
    for (const json& id : list) {
      if (!id.is_number_integer())
        throw InputError(fmt::format("{}: graph attribute 'order' lists {}, not a node id", source,
                                     io::brief(id)));
      if (id.is_number_unsigned() && id.get<uint64_t>() > uint64_t{INT64_MAX})  // no such node
        throw InputError(fmt::format(
            "{}: graph attribute 'order' lists node {}, which does not exist", source, id.dump()));
      order.push_back(id.get<int64_t>());
    }
    if (order.size() != nodes.size())
      throw InputError(fmt::format("{}: graph attribute 'order' lists {} nodes, the graph has {}",
                                   source, order.size(), nodes.size()));
    return order;
  }
  for (const NxNode& n : nodes) order.push_back(n.id);
  std::sort(order.begin(), order.end());
  return order;
}

// `wanted`, or `wanted` with the first free suffix ".2", ".3", ...; the result is taken.
std::string claim(std::unordered_set<std::string>& taken, const std::string& wanted) {
  std::string name = wanted;
  for (int k = 2; taken.contains(name); ++k) name = fmt::format("{}.{}", wanted, k);
  taken.insert(name);
  return name;
}

// Node names, unique: a name used once is kept; repeated names become "name#id", and a clash
// with any other name (a node really called "x#3") gets a further suffix.
std::vector<std::string> unique_names(const std::vector<NxNode>& nodes) {
  std::unordered_map<std::string, int> count;
  for (const NxNode& n : nodes) ++count[n.name];
  std::unordered_set<std::string> taken;
  for (const NxNode& n : nodes)
    if (count[n.name] == 1) taken.insert(n.name);
  std::vector<std::string> names;
  names.reserve(nodes.size());
  for (const NxNode& n : nodes)
    names.push_back(count[n.name] == 1 ? n.name : claim(taken, fmt::format("{}#{}", n.name, n.id)));
  return names;
}

}  // namespace

Graph import_networkx_json(std::string_view json_text, std::string_view source) {
  return io::networkx_from_doc(io::parse_json(json_text, source), source);
}

Graph io::networkx_from_doc(const json& doc, std::string_view source) {
  io::require_object(doc, source, "the document");
  const json& node_list = io::require_array(doc, "nodes", source, "the document");
  const json& links =
      io::require_array(doc, doc.contains("links") ? "links" : "edges", source, "the document");

  std::vector<NxNode> nodes;
  std::unordered_map<int64_t, size_t> index_of_id;
  for (size_t i = 0; i < node_list.size(); ++i) {
    nodes.push_back(read_nx_node(node_list[i], i, source));
    if (!index_of_id.emplace(nodes.back().id, i).second)
      throw InputError(fmt::format("{}: node id {} appears twice", source, nodes.back().id));
  }
  std::vector<std::vector<size_t>> predecessors(nodes.size());
  std::vector<bool> has_successor(nodes.size(), false);
  for (size_t i = 0; i < links.size(); ++i) {
    const auto [from, to] = read_edge(links[i], i, source);
    for (int64_t id : {from, to})
      if (!index_of_id.contains(id))
        throw InputError(fmt::format("{}: link at index {} refers to node {}, which does not exist",
                                     source, i, id));
    predecessors[index_of_id[to]].push_back(index_of_id[from]);
    has_successor[index_of_id[from]] = true;
  }

  // Node (and its value) at position k of the schedule gets id k.
  const std::vector<int64_t> order = schedule_ids(doc, nodes, source);
  std::vector<int32_t> position(nodes.size(), -1);
  for (size_t k = 0; k < order.size(); ++k) {
    auto it = index_of_id.find(order[k]);
    if (it == index_of_id.end())
      throw InputError(fmt::format(
          "{}: graph attribute 'order' lists node {}, which does not exist", source, order[k]));
    if (position[it->second] >= 0)
      throw InputError(
          fmt::format("{}: graph attribute 'order' lists node {} twice", source, order[k]));
    position[it->second] = static_cast<int32_t>(k);
  }

  GraphSpec spec;
  spec.name = doc.contains("graph") && doc["graph"].is_object() && doc["graph"].contains("name") &&
                      doc["graph"]["name"].is_string()
                  ? doc["graph"]["name"].get<std::string>()
                  : std::string();
  const std::vector<std::string> names = unique_names(nodes);
  spec.values.resize(nodes.size());
  spec.nodes.resize(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NxNode& n = nodes[i];
    const auto k = static_cast<size_t>(position[i]);
    const std::string& name = names[i];
    spec.values[k] = Value{.name = name, .size_bytes = n.size, .is_output = !has_successor[i]};
    Node& node = spec.nodes[k];
    node.name = name;
    node.cost = n.cost;
    node.phase = n.phase;
    node.outputs = {ValueId{static_cast<int32_t>(k)}};
    for (size_t p : predecessors[i]) node.inputs.push_back(ValueId{position[p]});
    std::sort(node.inputs.begin(), node.inputs.end());
  }
  std::unordered_set<std::string> taken(names.begin(), names.end());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].param_size == 0) continue;  // parameters are resident graph inputs
    const auto k = static_cast<size_t>(position[i]);
    spec.values.push_back(Value{.name = claim(taken, spec.nodes[k].name + ".param"),
                                .size_bytes = nodes[i].param_size});
    spec.nodes[k].inputs.push_back(ValueId{static_cast<int32_t>(spec.values.size() - 1)});
  }
  Graph graph = Graph::build(std::move(spec), source);
  require_outputs(graph, source);
  return graph;
}

}  // namespace remat
