"""DQN on a small grid-walk task, in the style of the PyTorch RL tutorial: a namedtuple Transition and
a deque replay memory sampled with random.sample, epsilon-greedy action selection with a decaying
epsilon (math.exp) and torch.rand / randint, policy_net(state).max(1).indices.view(1, 1) under
torch.no_grad(), Q(s, a) with gather(1, action_batch), a non-final mask built with
torch.tensor(tuple(map(...)), dtype=torch.bool), next-state values with .max(1).values under no_grad,
nn.SmoothL1Loss (and F.smooth_l1_loss / F.huber_loss checks), AdamW(amsgrad=True),
clip_grad_value_, a soft target update through state_dict() / load_state_dict(), and a hard copy
(target_net.load_state_dict(policy_net.state_dict())) at the start.
"""
import math
import random
from collections import deque, namedtuple

import numpy as np

from _common import main, sync_init

Transition = namedtuple("Transition", ("state", "action", "next_state", "reward"))


class ReplayMemory:
    def __init__(self, capacity, rnd):
        self.memory = deque([], maxlen=capacity)
        self.rnd = rnd

    def push(self, *args):
        self.memory.append(Transition(*args))

    def sample(self, batch_size):
        return self.rnd.sample(self.memory, batch_size)

    def __len__(self):
        return len(self.memory)


class GridWalk:
    """Walk on a line of N cells; start in the middle, reward 1 at the right end, -1 at the left end."""

    def __init__(self, n=7, rnd=None):
        self.n, self.rnd = n, rnd

    def reset(self):
        self.pos, self.t = self.n // 2, 0
        return self._obs()

    def _obs(self):
        v = np.zeros(self.n, np.float32)
        v[self.pos] = 1.0
        return v

    def step(self, action):
        self.pos += 1 if action == 1 else -1
        self.t += 1
        if self.pos >= self.n - 1:
            return self._obs(), 1.0, True
        if self.pos <= 0:
            return self._obs(), -1.0, True
        return self._obs(), -0.01, self.t >= 20


def run(torch, nn, F, init=None, episodes=14, deterministic=False, log=print):
    torch.manual_seed(0)
    rnd = random.Random(0)
    rng = np.random.RandomState(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    BATCH_SIZE, GAMMA, EPS_START, EPS_END, EPS_DECAY, TAU, LR = 16, 0.9, 0.9, 0.05, 60, 0.05, 3e-3
    env = GridWalk(rnd=rnd)
    n_obs, n_actions = env.n, 2

    class DQN(nn.Module):
        def __init__(self, n_observations, n_actions):
            super().__init__()
            self.layer1 = nn.Linear(n_observations, 32)
            self.layer2 = nn.Linear(32, 32)
            self.layer3 = nn.Linear(32, n_actions)

        def forward(self, x):
            x = F.relu(self.layer1(x))
            x = F.relu(self.layer2(x))
            return self.layer3(x)

    policy_net = DQN(n_obs, n_actions).to(device)
    target_net = DQN(n_obs, n_actions).to(device)
    init_state = sync_init(torch, policy_net, init)
    target_net.load_state_dict(policy_net.state_dict())
    optimizer = torch.optim.AdamW(policy_net.parameters(), lr=LR, amsgrad=True)
    memory = ReplayMemory(1000, rnd)
    steps_done = 0

    def uniform():
        return float(rng.rand()) if deterministic else torch.rand(1).item()

    def select_action(state):
        nonlocal steps_done
        sample = uniform()
        eps_threshold = EPS_END + (EPS_START - EPS_END) * math.exp(-1.0 * steps_done / EPS_DECAY)
        steps_done += 1
        if sample > eps_threshold:
            with torch.no_grad():
                return policy_net(state).max(1).indices.view(1, 1)
        a = int(rng.randint(n_actions)) if deterministic else torch.randint(0, n_actions, (1,)).item()
        return torch.tensor([[a]], device=device, dtype=torch.long)

    criterion = nn.SmoothL1Loss()

    def optimize_model():
        if len(memory) < BATCH_SIZE:
            return None
        transitions = memory.sample(BATCH_SIZE)
        batch = Transition(*zip(*transitions))
        non_final_mask = torch.tensor(tuple(map(lambda s: s is not None, batch.next_state)), device=device,
                                      dtype=torch.bool)
        finals = [s for s in batch.next_state if s is not None]
        state_batch = torch.cat(batch.state)
        action_batch = torch.cat(batch.action)
        reward_batch = torch.cat(batch.reward)
        state_action_values = policy_net(state_batch).gather(1, action_batch)
        next_state_values = torch.zeros(BATCH_SIZE, device=device)
        if finals:
            with torch.no_grad():
                next_state_values[non_final_mask] = target_net(torch.cat(finals)).max(1).values
        expected = (next_state_values * GAMMA) + reward_batch
        loss = criterion(state_action_values, expected.unsqueeze(1))
        alt = F.smooth_l1_loss(state_action_values.squeeze(1), expected, beta=1.0)
        hub = F.huber_loss(state_action_values.squeeze(1), expected, delta=1.0)
        assert abs(alt.item() - loss.item()) < 1e-6 and abs(hub.item() - loss.item()) < 1e-6
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_value_(policy_net.parameters(), 100)
        optimizer.step()
        return loss.item()

    losses, returns, lengths = [], [], []
    for i_episode in range(episodes):
        state = torch.tensor(env.reset(), dtype=torch.float32, device=device).unsqueeze(0)
        total = 0.0
        for t in range(100):
            action = select_action(state)
            observation, reward, done = env.step(action.item())
            total += reward
            reward = torch.tensor([reward], device=device)
            next_state = None if done else torch.tensor(observation, dtype=torch.float32, device=device).unsqueeze(0)
            memory.push(state, action, next_state, reward)
            state = next_state
            loss = optimize_model()
            if loss is not None:
                losses.append(loss)
            target_net_state_dict = target_net.state_dict()
            policy_net_state_dict = policy_net.state_dict()
            for key in policy_net_state_dict:
                target_net_state_dict[key] = policy_net_state_dict[key] * TAU + target_net_state_dict[key] * (1 - TAU)
            target_net.load_state_dict(target_net_state_dict)
            if done:
                lengths.append(t + 1)
                returns.append(round(total, 4))
                break
        log(f"episode {i_episode}: length {lengths[-1]} return {returns[-1]:.2f}")

    with torch.no_grad():
        eye = torch.eye(n_obs, device=device)
        greedy = policy_net(eye).argmax(dim=1).tolist()
        q = policy_net(eye).max(dim=1)[0]
    return {"losses": losses, "lengths": lengths, "returns": returns, "greedy": greedy, "q": q.tolist(),
            "init": init_state}


if __name__ == "__main__":
    main(run)
